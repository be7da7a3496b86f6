/* rules_diffusion.h: the diffusion ops' shape rules (rules_diffusion.c), for
 * rules.c's table. */
#ifndef MEMPLAN_RULES_DIFFUSION_H
#define MEMPLAN_RULES_DIFFUSION_H

#include "build.h"

void groupnorm_build(BuildCtx *c);
void add_channels_build(BuildCtx *c);
void upsample_build(BuildCtx *c);
void timestep_embedding_build(BuildCtx *c);
void conv_transpose2d_build(BuildCtx *c);
void ddpm_noise_build(BuildCtx *c);

#endif
