/* export.h -- writes a FaRR-truncated model (the working copy: the latest VO and/or QK plans of
 * a model) to a new folder that attnlab, and a loader of the family, can open.
 *
 * Formats:
 *   hf       DeepSeek-V3 layout (MLA) only, every layer truncated at one rank (policy model-max
 *            or one fixed rank over all layers): config.json gets qk_nope_head_dim (QK) and/or
 *            v_head_dim (VO) = the kept rank, and q_b_proj (or q_proj), kv_b_proj and o_proj are
 *            resliced per head to the new sizes. Because the model scales scores by
 *            1/sqrt(qk_nope + qk_rope), a QK export multiplies each head's query rows by
 *            q_scale = sqrt((r + rope) / (nope + rope)) so that the scores are unchanged; the
 *            exported W_Q' W_K'^T is therefore q_scale x the truncated map (recorded in the manifest).
 *   factors  any family: the original layout and config.json, with each truncated head written
 *            zero-padded to its old size (so it computes exactly the truncated maps and loads
 *            anywhere), plus the compact per-head factors in farr/factors.safetensors
 *            (F32; names `layers.L.<vo|qk>.shared.G` = W_V'[G] or W_K'[G] (d_in_kv x r) and
 *            `layers.L.<vo|qk>.head.H` = W_O'[H] (r x hidden) or W_Q'[H] (d_in_q x r)).
 *   dense    any family: the source's family, config.json, tensor names, shapes and dtypes, with
 *            each truncated head's rank-r factors written at full shape: exactly the factors
 *            format's weights (W_V' = [F_V 0], W_O' = [F_O ; 0] per head, and W_Q', W_K' alike, so
 *            W_V' W_O' = F_V F_O is the plan's truncated fused map with no rounding but the
 *            dtype's), without the farr/ side files: every engine and evaluation harness loads it
 *            as the source's family. `check DIR` (farr_dense_check) confirms its fused maps.
 * All write farr_manifest.json (method, tau or rank, policy, per-layer ranks, parameter and
 * KV-cache counts, energies and errors).
 *
 * Every tensor the truncation does not change is copied bit for bit (its raw bytes, dtype and FP8
 * scales kept): tensors of other layers, of layers whose every group keeps its full rank, and,
 * inside a rewritten tensor (factors/dense, bias-free layers), the rows/columns of groups kept at
 * full rank hold the source's values. A changed tensor is re-encoded in ExportOpts.dtype: by
 * default the source's dtype, but BF16 for an FP8 source (its _scale_inv dropped and the module
 * listed in quantization_config.modules_to_not_convert, which transformers' FineGrainedFP8 and
 * vLLM's Fp8Config read, so it loads as a plain Linear beside the FP8 ones; a new list starts with
 * the source's unquantized linears such as lm_head, which transformers adds only when the config
 * lists none); with dtype F8_E4M3 every 128x128 block whose values did not change keeps its codes and scale bit for bit, a
 * changed block keeps its scale (times 2^k when the new values need it) and the unchanged
 * values in it their codes; to that end each cut group's factors are written as c F_V and F_O / c
 * (QK: c F_K, F_Q / c; the fused map unchanged), c fitting both under their blocks' old scales where
 * one does, else the shared side (manifest: per_layer.fp8_balance). The added error of
 * re-encoding is measured (ExportReport.reenc_err). A per-tensor / per-channel FP8 source (compressed-
 * tensors, ModelOpt FP8) is written in its own strategy, scale shape and dtype (fp8ct.h): the source's
 * scale times 2^k per unit, input_scale kept; a module with a static input_scale whose input the cut
 * changes (o_proj after VO) is written BF16 and listed unquantized (ExportReport.ct_bf16).
 * A quantized shard of a layer vLLM fuses (q/k/v_proj -> qkv_proj; quant_fused.h) that the cut leaves
 * unchanged while it rewrites another shard unquantized (a VO cut's v_proj in BF16) is written
 * unquantized too (dequantized, in the same dtype) and listed with it, since vLLM and SGLang refuse a
 * fused layer whose shards are not all quantized alike (ExportReport.fused_plain; manifest:
 * reencoded.fused_siblings).
 * One output shard per source file (model.safetensors, or model-0000i-of-0000N.safetensors with an
 * index), copied tensors streamed from the source's mapping; the source's auxiliary files
 * (tokenizer, generation config, licence) are copied, nothing else. Everything goes through the
 * checkpoint writer (core/io/ckpt_write.h): staged beside the destination and renamed into place
 * only when complete. The destination must not be (or be inside) the source folder, and an
 * existing non-empty destination is refused unless force, which replaces it as a whole. */
#ifndef AL_EXPORT_H
#define AL_EXPORT_H

#include "farr.h"

typedef enum { EXPORT_AUTO, EXPORT_HF, EXPORT_FACTORS, EXPORT_DENSE } export_format;

typedef struct {
    export_format format;    /* AUTO: hf when the plans allow it, else factors */
    bool force;              /* replace an existing non-empty folder as a whole */
    bool dtype_set;          /* dtype given: the changed tensors are written in it (F32, F16, BF16,
                                F8_E4M3: an FP8 source only); else the source's, BF16 for FP8 */
    dt_type dtype;
} ExportOpts;

/* What an export did (for the command's report). */
typedef struct {
    export_format format;    /* the format used */
    size_t files;            /* files written */
    size_t tensors_copied;   /* tensors copied bit for bit */
    size_t tensors_rewritten;
    size_t bytes;            /* bytes of tensor data written */
    double q_scale;          /* hf QK only (else 1) */
    /* the changed tensors, re-encoded (reenc_tensors of them) from reenc_from to reenc_to */
    size_t reenc_tensors;
    dt_type reenc_from, reenc_to;
    dt_fp4_enc reenc_fp4;    /* the first one's FP4 / INT4 encoding when it had one (reenc_from is then the BF16 it
                                was decoded to): export_reenc_from names it */
    int reenc_lo, reenc_hi;  /* their layers */
    char reenc_names[160];   /* their distinct suffixes, ", "-joined ("self_attn.kv_b_proj.weight, ...") */
    double reenc_err;        /* max over them of ||W_written - W'|| / ||W'||: what encoding added */
    size_t fp8_blocks, fp8_blocks_kept;  /* dtype F8_E4M3: their blocks, and those kept bit for bit */
    size_t ct_bf16;          /* dtype F8_E4M3: per-tensor / per-channel FP8 weights written BF16 (fp8ct.h) */
    size_t fused_plain;      /* quantized weights the cut leaves unchanged, written unquantized beside a rewritten
                                shard of a layer vLLM fuses (quant_fused.h: q/k/v_proj), so the shards stay alike */
    char fused_names[160];   /* their distinct suffixes, ", "-joined */
    size_t kv_scales_dropped;  /* a static FP8 KV cache's per-layer scales (quant_fused.h: quant_kv_scale) of the
                                  layers whose cached keys or values the cut changes (not MLA's latent): dropped */
    int kv_lo, kv_hi;        /* their layers */
    bool kv_q;               /* a q_scale among them */
    unsigned dropped_scales; /* the scale tensors of FP8 weights written in another dtype that were dropped: bits
                                1 "<w>_scale_inv", 2 "<w>_scale" (weight_scale), 4 the module's input_scale */
    char plain_lists[160];   /* the lists those modules joined ("quantization_config.ignore, hf_quant_config.json
                                quantization.exclude_modules") */
} ExportReport;

/* What the re-encoded tensors were stored in: "MXFP4", "NVFP4", "INT4" or reenc_from's dtype name. */
const char *export_reenc_from(const ExportReport *r);

/* "hf" / "factors" / "dense" / "auto"; parse returns AL_ERR naming the accepted words. */
const char *export_format_name(export_format f);
int export_format_parse(const char *s, export_format *out);

/* Why the hf format cannot hold these plans (NULL when it can). Static string. */
const char *export_hf_refusal(const Model *m, const FarrPlan *vo, const FarrPlan *qk);

/* Exports m with the plans applied (either may be NULL, not both) into dir. rep may be NULL. */
int farr_export(Model *m, const FarrPlan *vo, const FarrPlan *qk, const char *dir,
                const ExportOpts *opts, ExportReport *rep);

/* ================================================================ check of an export */

/* True when dir holds a FaRR export (its farr_manifest.json names FaRR), in any format. */
bool farr_is_export(const char *dir);

typedef struct {
    char *export_path, *source_path;
    size_t heads;             /* heads compared (VO and QK truncations) */
    double sv_err;            /* max over heads and i < r of |s'_i - s_i| / s_0: the export's kept singular
                                 values against the source's leading ones (r: the head's rank); only
                                 where each head has its own basis (MHA, MLA: not GQA groups, whose
                                 shared basis keeps other values): 0 otherwise */
    double tail;              /* max over heads of s'_i / s_0 for i >= r: what the export has past the rank */
    char format[16];          /* the manifest's format (hf, factors, dense) */
    char encoding[16];        /* the dtype its changed tensors were re-encoded in ("" when none) */
    double added_err;         /* what that encoding added (the manifest's added_rel_error_max) */
} FarrDenseCheck;

void farr_dense_check_free(FarrDenseCheck *c);
/* Opens the FaRR export in dir (any format) and its source (src, or the manifest's source when
 * NULL) and compares, for every truncated head, the export's fused map (VO: W_V W_O; QK: W_Q W_K^T,
 * NoPE columns for MLA, divided by an hf export's q_scale) with the plan's: rank r (zero singular
 * values past r) and, per-head truncations, the source's leading r singular values. */
int farr_dense_check(const char *dir, Model *src, FarrDenseCheck **out);

#endif
