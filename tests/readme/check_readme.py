#!/usr/bin/python3
"""Run the commands README.md and docs/*.md show, compare their output with what they show, check their links.

usage: check_readme.py README BUILD_BIN_DIR WORKDIR

The pages are README and every .md file under the docs/ folder beside it
(README first, then the docs pages in path order). A fenced code block of a
page is checked when it holds `$ command` lines
(cram style): each `$ ` line is a command, and the lines after it, up to the
next `$ ` line or the end of the block, are its output (stdout and stderr
together, as a terminal shows them). Every shown line must equal a line of
the real output, in order, except:

  ...     a line that is only `...` (indented or not) stands for any number
          of output lines, none included (elision);
  …       (U+2026) inside a line stands for one number that differs between
          runs or machines: a time or a throughput. It must come right before
          a unit of time or throughput (` ms`, ` s`, ` us`, ` tokens/s`,
          ` GFLOP/s`), so a plan number can never be left unchecked;
  [N]     a last line `[N]` is the exit status N of a command that failed;
          a command that shows none must exit 0.

A block is skipped only with a marker as the last non-blank line before its
opening fence: `<!-- readme-check: skip (the reason) -->`; the reason is
required and printed.

Commands run with bash, one after another in page order (a later block, or a
later page, may read what an earlier one wrote), in WORKDIR (emptied first), which stands in
for the repository root: it links every top-level entry of the repository
except `out` and `build`, `out/` is a new empty folder there, and `build/bin`
links to BUILD_BIN_DIR. So `build/bin/memplan` is the binary under test,
`models/...` and `tests/...` are the repository's files, and whatever a
command writes (`-o out/...`, `-o timeline.svg`) lands in WORKDIR, never in
the source tree. A command written twice runs once.

Links: every relative link of a page (`[text](path)`, `![alt](path)`,
`<img src="path">`, `<a href="path">`, outside code) must name a file or
folder of the repository, and its `#anchor`, if any, a heading of that page
(GitHub's anchor: the heading lowercased, punctuation dropped, spaces as
`-`, `-1`, `-2` for repeats) or an `id`/`name` attribute in it. Links with a
scheme (`https:`) are not fetched.

Each mismatch is printed as a unified diff whose `-` side numbers are the
page's lines; each broken link with its page and line; the exit status is 1
if any block or link failed.
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
import time

SKIP = re.compile(r'^<!--\s*readme-check:\s*skip\s*\((?P<reason>[^)]*\S[^)]*)\)\s*-->$')
DIRECTIVE = re.compile(r'^<!--\s*readme-check\b')
FENCE = re.compile(r'^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>.*)$')
WILD = '\u2026'  # …
WILD_UNIT = re.compile(WILD + r'(?= (?:ms|s|us|tokens/s|GFLOP/s)\b)')
NUMBER = r' *[-+]?[0-9][0-9.,]*(?:e[-+]?[0-9]+)?'
STATUS = re.compile(r'^\[(?P<rc>[0-9]+)\]$')
CMD_TIMEOUT = 600


class ReadmeError(Exception):
    pass


def blocks(file, path):
    """Yield (fence_line, skip_reason, [(line_no, text)]) for every fenced block of file (named path)."""
    with open(file, encoding='utf-8') as f:
        lines = f.read().split('\n')
    last_text = None  # (line_no, text) of the last non-blank line outside blocks
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                if DIRECTIVE.match(lines[i].strip()) and not SKIP.match(lines[i].strip()):
                    raise ReadmeError(f'{path}:{i + 1}: malformed readme-check marker (want '
                                      f'`<!-- readme-check: skip (reason) -->`): {lines[i].strip()}')
                if last_text and SKIP.match(last_text[1]):
                    raise ReadmeError(f'{path}:{last_text[0]}: readme-check marker not followed by a code block')
                last_text = (i + 1, lines[i].strip())
            i += 1
            continue
        start, indent, fence = i + 1, m.group('indent'), m.group('fence')
        body = []
        i += 1
        while i < len(lines) and not re.match(r'^ *' + re.escape(fence[0]) + '{%d,} *$' % len(fence), lines[i]):
            text = lines[i]
            body.append((i + 1, text[len(indent):] if text.startswith(indent) else text.lstrip(' ')))
            i += 1
        if i == len(lines):
            raise ReadmeError(f'{path}:{start}: code block never closed')
        i += 1
        skip = SKIP.match(last_text[1]) if last_text else None
        yield start, (skip.group('reason').strip() if skip else None), body
        last_text = None


def parse_block(path, start, body):
    """The commands of a `$` block: [(line_no, command, [(line_no, shown_line)])]."""
    cmds = []
    for no, text in body:
        if text.startswith('$ '):
            cmds.append((no, text[2:].strip(), []))
        elif not cmds:
            if text.strip():
                raise ReadmeError(f'{path}:{no}: text before the first `$ ` command of the block at line {start}')
        else:
            cmds[-1][2].append((no, text))
    for no, _, shown in cmds:
        for k, (lno, text) in enumerate(shown):
            if WILD in text and len(WILD_UNIT.findall(text)) != text.count(WILD):
                raise ReadmeError(f'{path}:{lno}: `{WILD}` may only stand for a time or throughput, right '
                                  f'before its unit (` ms`, ` s`, ` us`, ` tokens/s`, ` GFLOP/s`): {text}')
            if STATUS.match(text) and k != len(shown) - 1:
                raise ReadmeError(f'{path}:{lno}: an exit status `[N]` must be the last line shown')
        # a block's trailing blank lines are layout, not output
        while shown and not shown[-1][1].strip():
            shown.pop()
    return cmds


def line_matcher(text):
    """A predicate for one shown line."""
    if WILD not in text:
        return lambda actual: actual == text
    parts = text.split(WILD)
    rx = re.compile(NUMBER.join(re.escape(p) for p in parts) + r'\Z')
    return lambda actual: rx.match(actual) is not None


def is_elision(text):
    return text.strip() == '...'


def similar(shown, actual):
    """Whether a shown line that does not match reads as an edit of this output line."""
    if is_elision(actual) or not shown.strip() or not actual.strip():
        return False
    sm = difflib.SequenceMatcher(None, shown, actual, autojunk=False)
    return sm.real_quick_ratio() >= 0.6 and sm.quick_ratio() >= 0.6 and sm.ratio() >= 0.6


def align(shown, actual):
    """Cheapest alignment of shown lines (with elisions) against actual lines.

    Cheapest means the most shown lines matched first (so a diff pairs up what
    still matches), then the fewest output lines left over outside elisions.
    A shown line that does not match may be paired with a similar output line
    (a changed number, say), so the diff shows both even next to an elision.
    Returns (cost, ops); cost 0 means the output matches. ops is a list of
    ('elide', s, [actual...]), ('match', s, a), ('sub', s, a), ('del', s, None),
    ('ins', None, a).
    """
    n, m = len(shown), len(actual)
    DEL, INS = m + 1, 1  # one unmatched shown line costs more than all output lines
    kinds = [('elide', None) if is_elision(t) else ('line', line_matcher(t)) for t in shown]
    inf = float('inf')
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    for j in range(m + 1):
        cost[n][j] = (m - j) * INS
    for i in range(n - 1, -1, -1):
        kind, match = kinds[i]
        for j in range(m, -1, -1):
            if kind == 'elide':
                best = cost[i + 1][j]
                if j < m:
                    best = min(best, cost[i][j + 1])
            else:
                best = DEL + cost[i + 1][j]
                if j < m:
                    best = min(best, INS + cost[i][j + 1])
                    if match(actual[j]):
                        best = min(best, cost[i + 1][j + 1])
                    elif similar(shown[i], actual[j]):
                        best = min(best, DEL + cost[i + 1][j + 1])
            cost[i][j] = best
    ops, i, j = [], 0, 0
    while i < n or j < m:
        if i == n:
            ops.append(('ins', None, actual[j]))
            j += 1
            continue
        kind, match = kinds[i]
        if kind == 'elide':
            absorbed = []
            while j < m and cost[i][j] == cost[i][j + 1] and cost[i][j] != cost[i + 1][j]:
                absorbed.append(actual[j])
                j += 1
            ops.append(('elide', shown[i], absorbed))
            i += 1
        elif j < m and match(actual[j]) and cost[i][j] == cost[i + 1][j + 1]:
            ops.append(('match', shown[i], actual[j]))
            i += 1
            j += 1
        elif j < m and cost[i][j] == DEL + cost[i + 1][j + 1] and similar(shown[i], actual[j]):
            ops.append(('sub', shown[i], actual[j]))
            i += 1
            j += 1
        elif cost[i][j] == DEL + cost[i + 1][j]:
            ops.append(('del', shown[i], None))
            i += 1
        else:
            ops.append(('ins', None, actual[j]))
            j += 1
    return cost[0][0], ops


def diff(path, cmd_line, cmd, shown_first_line, shown, actual):
    """A unified diff, shown lines (README line numbers) against the real output."""
    _, ops = align(shown, actual)
    left, right = [], []
    for op, s, a in ops:
        if op in ('elide', 'match'):
            left.append(s)
            right.append(s)  # matched through `...` or `…`: no difference to show
        elif op == 'sub':
            left.append(s)
            right.append(a)
        elif op == 'del':
            left.append(s)
        else:
            right.append(a)
    out = [f'--- {path}:{cmd_line} (shown)', f'+++ actual output of: {cmd}']
    offset = shown_first_line - 1
    for d in difflib.unified_diff(left, right, lineterm='', n=3):
        if d.startswith('---') or d.startswith('+++'):
            continue
        h = re.match(r'^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@$', d)
        if h:
            d = f'@@ -{int(h.group(1)) + offset}{h.group(2) or ""} +{h.group(3)}{h.group(4) or ""} @@'
        out.append(d)
    return '\n'.join(out)


MARK = '.readme-check-workdir'

SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
MD_LINK = re.compile(r'!?\[(?:[^\]\\]|\\.)*\]\(\s*(?:<(?P<angle>[^>]*)>|(?P<plain>[^)\s]+))(?:\s+"[^"]*")?\s*\)')
HTML_LINK = re.compile(r'<(?:img|a)\b[^>]*?\b(?:src|href)\s*=\s*"(?P<target>[^"]*)"', re.I)
HTML_ANCHOR = re.compile(r'<a\b[^>]*?\b(?:id|name)\s*=\s*"(?P<id>[^"]*)"', re.I)
CODE_SPAN = re.compile(r'(`+)(?:(?!\1).)+?\1')


def pages(readme):
    """README, then every .md file under docs/ beside it, in path order."""
    docs = os.path.join(os.path.dirname(readme), 'docs')
    found = []
    for root, dirs, files in os.walk(docs):
        dirs.sort()
        found += [os.path.join(root, f) for f in sorted(files) if f.endswith('.md')]
    return [readme] + found


def prose(file):
    """(line_no, text) of the lines outside fenced code blocks, inline code blanked."""
    with open(file, encoding='utf-8') as f:
        lines = f.read().split('\n')
    fence = None
    for no, text in enumerate(lines, 1):
        m = FENCE.match(text)
        if fence is None and m:
            fence = m.group('fence')
            continue
        if fence is not None:
            if re.match(r'^ *' + re.escape(fence[0]) + '{%d,} *$' % len(fence), text):
                fence = None
            continue
        yield no, CODE_SPAN.sub(lambda c: ' ' * len(c.group(0)), text)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading.strip().lower())
    return re.sub(r'[^\w\- ]', '', text).replace(' ', '-')


def anchors(file, cache={}):
    if file not in cache:
        found, seen = set(), {}
        with open(file, encoding='utf-8') as f:
            raw = f.read().split('\n')
        for no, text in prose(file):
            h = re.match(r'^ {0,3}#{1,6} +(.*?)(?: +#+)? *$', text)
            if h:
                base = slug(raw[no - 1].lstrip(' #').rstrip(' #'))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f'{base}-{n}')
            found.update(m.group('id') for m in HTML_ANCHOR.finditer(text))
        cache[file] = found
    return cache[file]


def check_links(file, name, repo):
    """Messages for the broken relative links of one page."""
    broken = []
    real_repo = os.path.realpath(repo)
    for no, text in prose(file):
        targets = [m.group('angle') if m.group('angle') is not None else m.group('plain')
                   for m in MD_LINK.finditer(text)]
        targets += [m.group('target') for m in HTML_LINK.finditer(text)]
        for target in targets:
            if SCHEME.match(target):
                continue
            path, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(file), path)) if path else file
            real = os.path.realpath(dest)
            if real != real_repo and not real.startswith(real_repo + os.sep):
                broken.append(f'{name}:{no}: link `{target}` leaves the repository')
            elif not os.path.exists(dest):
                broken.append(f'{name}:{no}: link `{target}`: no such file ({os.path.relpath(dest, repo)})')
            elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                broken.append(f'{name}:{no}: link `{target}`: {os.path.relpath(dest, repo)} has no heading '
                              f'or anchor `#{anchor}`')
    return broken


def make_workdir(repo, bindir, workdir):
    """WORKDIR as the repository root's stand-in (see the top)."""
    real_repo, real_work = os.path.realpath(repo), os.path.realpath(workdir)
    if real_repo == real_work or real_repo.startswith(real_work + os.sep):
        raise ReadmeError(f'WORKDIR {workdir} would hold the repository; give a folder of its own')
    if os.path.lexists(workdir):
        if os.listdir(workdir) and not os.path.exists(os.path.join(workdir, MARK)):
            raise ReadmeError(f'WORKDIR {workdir} is not empty and not one of ours; not removing it')
        shutil.rmtree(workdir)  # removes the links, never what they point to
    os.makedirs(os.path.join(workdir, 'out'))
    os.makedirs(os.path.join(workdir, 'build'))
    open(os.path.join(workdir, MARK), 'w').close()
    os.symlink(os.path.abspath(bindir), os.path.join(workdir, 'build', 'bin'))
    for name in sorted(os.listdir(repo)):
        if name not in ('out', '.git') and not name.startswith('build'):
            os.symlink(os.path.join(repo, name), os.path.join(workdir, name))


def run(cmd, workdir):
    # In the sanitizer build LeakSanitizer lists the suppressions it used
    # (codegen/dot.c: Graphviz's and fontconfig's own allocations) on stderr;
    # that list is not the program's output. A real leak still fails the
    # command, which then shows its report and exit status in the diff.
    env = dict(os.environ)
    env['LSAN_OPTIONS'] = ':'.join(o for o in (env.get('LSAN_OPTIONS'), 'print_suppressions=0') if o)
    t0 = time.monotonic()
    try:
        p = subprocess.run(['bash', '-c', cmd], cwd=workdir, stdin=subprocess.DEVNULL, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=CMD_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f'timed out after {CMD_TIMEOUT} s', time.monotonic() - t0
    text = p.stdout.decode('utf-8', errors='replace')
    lines = text.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    if p.returncode != 0:
        lines.append(f'[{p.returncode}]')
    return lines, None, time.monotonic() - t0


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__.split('\n\n')[1] + '\n')
        return 2
    readme, bindir, workdir = argv[1:]
    readme = os.path.abspath(readme)
    repo = os.path.dirname(readme)
    if not os.access(os.path.join(bindir, 'memplan'), os.X_OK):
        sys.stderr.write(f'check_readme: no memplan in {bindir}\n')
        return 2
    t_all = time.monotonic()
    cache = {}
    checked_blocks = checked_cmds = skipped_blocks = skipped_cmds = 0
    failures = []
    files = pages(readme)
    names = [os.path.relpath(f, repo) for f in files]
    links = 0
    try:
        for file, name in zip(files, names):
            for msg in check_links(file, name, repo):
                failures.append(msg)
                print(f'FAIL  {msg}')
        links = len(failures)
        make_workdir(repo, bindir, os.path.abspath(workdir))
        all_blocks = [(name, b) for file, name in zip(files, names) for b in blocks(file, name)]
        for name, (start, skip, body) in all_blocks:
            if not any(t.startswith('$ ') for _, t in body):
                if skip:
                    raise ReadmeError(f'{name}:{start}: skip marker on a block without `$ ` commands')
                continue
            cmds = parse_block(name, start, body)
            if skip:
                skipped_blocks += 1
                skipped_cmds += len(cmds)
                print(f'skip  {name}:{start}: {len(cmds)} command(s): {skip}')
                continue
            checked_blocks += 1
            for no, cmd, shown in cmds:
                checked_cmds += 1
                if cmd in cache:
                    actual, err, secs = cache[cmd]
                    note = 'ran above'
                else:
                    actual, err, secs = run(cmd, workdir)
                    cache[cmd] = (actual, err, secs)
                    note = f'{secs:.1f} s'
                if err:
                    failures.append(f'{name}:{no}: `{cmd}`: {err}')
                    print(f'FAIL  {name}:{no}: {cmd} ({err})')
                    continue
                texts = [t for _, t in shown]
                cost, _ = align(texts, actual)
                if cost == 0:
                    print(f'ok    {name}:{no}: {cmd} ({note})')
                else:
                    first = shown[0][0] if shown else no + 1
                    failures.append(diff(name, no, cmd, first, texts, actual))
                    print(f'FAIL  {name}:{no}: {cmd} ({note})')
    except ReadmeError as e:
        print(f'check_readme: {e}')
        return 1
    print(f'{len(files)} pages: {checked_cmds} commands in {checked_blocks} blocks checked, {skipped_cmds} '
          f'commands in {skipped_blocks} blocks skipped, {len(failures) - links} failed; {links} broken links '
          f'({time.monotonic() - t_all:.1f} s)')
    if links:
        print('\nThese links name no file or heading of the repository; fix them:\n')
        print('\n'.join(failures[:links]))
    if len(failures) > links:
        print('\nThese pages no longer show what these commands print; update them (or the program):\n')
        print('\n\n'.join(failures[links:]))
    if failures:
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
