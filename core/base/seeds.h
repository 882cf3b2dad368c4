/* seeds.h -- the fixed random seeds of attnlab, in one place: each names the draw it seeds (the
 * evaluation inputs of a conversion, a check or a comparison). The values are part of what the
 * CLI prints (errors measured on those inputs), so changing one changes transcripts. They are the
 * defaults of the commands' `seed S` (compare, convert mla, convert tpa, check, plot compare),
 * which print the seed they used; `check` takes the conversion's (in the session, or recorded in
 * the export's manifest: check_inputs.h). Tests pass their own seeds. */
#ifndef AL_SEEDS_H
#define AL_SEEDS_H

/* TransMLA's per-layer evaluation inputs (TmlaOpts.seed default). */
#define AL_SEED_TMLA_EVAL 20250601ULL
/* `check DIR` of an MLA export whose manifest records no check inputs (an older attnlab). */
#define AL_SEED_MLA_CHECK 20250601ULL
/* TPA's per-layer report inputs (TpaOpts.seed default; layer l uses seed + l). */
#define AL_SEED_TPA_EVAL 20250604ULL
/* `check DIR` of a TPA export whose manifest records no check inputs (an older attnlab). */
#define AL_SEED_TPA_CHECK 20250605ULL
/* `compare`'s evaluation tokens (BudgetOpts.seed default; the fit tokens use seed + 1), and `check` /
 * `check DIR` of a FaRR truncation, so that their errors are compare's FaRR row. */
#define AL_SEED_COMPARE 20250607ULL

#endif
