"""modules.py: the nn.Modules tests/torch_import/check.py imports with
`memplan import-torch tests/torch_import/modules.py:NAME`: written as users
write them (nn layers, a forward), tiny so that each test takes seconds."""
import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, d=12, h=16, k=5):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, h)
        self.head = nn.Linear(h, k)

    def forward(self, x):
        return self.head(F.gelu(self.fc2(torch.relu(self.fc1(x)))))


class Block(nn.Module):
    """A ResNet basic block: two 3x3 convs with BatchNorm, a projection shortcut when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class SmallCNN(nn.Module):
    """A small ResNet: conv stem with BatchNorm, max pooling, two residual blocks, global average pooling."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, momentum=0.2),
                                  nn.ReLU(inplace=True))
        self.pool = nn.MaxPool2d(2)
        self.layer1 = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layer1(self.pool(self.stem(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))
