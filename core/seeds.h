/* seeds.h -- the fixed random seeds of attnlab, in one place: each names the draw it seeds (the
 * evaluation inputs of a conversion, a check or a comparison). The values are part of what the
 * CLI prints (errors measured on those inputs), so changing one changes transcripts. Tests pass
 * their own seeds. */
#ifndef AL_SEEDS_H
#define AL_SEEDS_H

/* TransMLA's per-layer evaluation inputs (TmlaOpts.seed default). */
#define AL_SEED_TMLA_EVAL 20250601ULL
/* `check` of an MLA export (`convert mla` / `export`ed folders) against its source. */
#define AL_SEED_MLA_CHECK 20250601ULL
/* TPA's per-layer report inputs (TpaOpts.seed default; layer l uses seed + l). */
#define AL_SEED_TPA_EVAL 20250604ULL
/* `check` of a TPA conversion against its source. */
#define AL_SEED_TPA_CHECK 20250605ULL
/* `compare`'s evaluation tokens (CmpOpts.seed default; the fit tokens use seed + 1). */
#define AL_SEED_COMPARE 20250607ULL

#endif
