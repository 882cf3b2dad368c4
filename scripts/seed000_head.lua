-- seed000_head.lua -- seed 000 sections 1.3 and 1.4 on demo-r1: one query head taken apart.
--
--   attnlab scripts/seed000_head.lua OUTDIR [MODEL]
--
-- The seed decomposes Kimi-K2 layer 13 query head 50, W_Q = W_QA diag(sigma) W_QB, and shows
-- W_QAᵀ, W_QB, the singular values, W_QB scaled by sigma (low-sigma rows fade to white) and the
-- cumulative energy with the 99% / 99.9% points. demo-r1's layer 2 plants the same situation
-- (a "fused-low" pair: W_Q has 4 strong directions and a weak tail), so its figures read the
-- same way. Writes five PNGs into OUTDIR and prints what each one shows.

local out = arg[1] or error("usage: attnlab scripts/seed000_head.lua OUTDIR [MODEL]")
local model = arg[2] or "demo-r1"
local layer, head = 2, 0

attn.load(model)
attn.set("plot.size", "1200x800")

local figures = {}
local function fig(name, caption, sub, kind, opts)
  opts.to = out .. "/" .. name
  local path = attn.plot(sub, kind, opts)
  figures[#figures + 1] = { path = path, caption = caption }
end

local at = { layer = layer, head = head }
local function with(t, extra)
  local r = {}
  for k, v in pairs(t) do r[k] = v end
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

-- 1.3: the two factors, the spectrum, and W_QB scaled by sigma.
fig("1.3a_wqa_t.png", "W_QAᵀ: one row per singular direction, the latent directions the head reads",
    "heatmap", "q", with(at, { factor = "a" }))
fig("1.3b_wqb.png", "W_QB: the directions of head space it writes, sorted by sigma (no visible pattern)",
    "heatmap", "q", with(at, { factor = "b" }))
fig("1.3c_spectrum.png", "singular values of W_Q: a few strong directions, then a weak tail",
    "spectrum", "q", with(at))
fig("1.3d_wqb_scaled.png", "diag(sigma) W_QB: rows with small sigma fade to white -- what truncation drops",
    "heatmap", "q", with(at, { factor = "scaled" }))

-- 1.4: cumulative energy and the effective rank at tau = 0.99 and 0.999.
fig("1.4_energy.png", "cumulative energy over the spectrum, tau = 0.99 and 0.999 marked with their ranks",
    "energy", "q", with(at))

print(("seed 000 sections 1.3-1.4 on %s, layer %d query head %d: %d figures in %s"):format(
  model, layer, head, #figures, out))
for _, f in ipairs(figures) do print(("  %s\n      %s"):format(f.path, f.caption)) end
