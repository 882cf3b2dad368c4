-- seed000_head.lua -- seed 000 sections 1.3 and 1.4: one query head taken apart.
--
--   attnlab scripts/seed000_head.lua OUTDIR [MODEL]        (default demo-r1)
--
-- The seed decomposes Kimi-K2 layer 13 query head 50, W_Q = U diag(sigma) Vt, and shows Uᵀ, Vt,
-- the singular values, Vt scaled by sigma (low-sigma rows fade to white) and the cumulative
-- energy with the 99% / 99.9% points. This notebook looks at every query head's W_Q (one
-- projection alone: no RoPE problem, so full-RoPE models work too) and takes the one whose
-- energy is most concentrated (the lowest effective rank at 0.99; ties: the earliest head), the
-- seed's situation where there is one. On demo-r1 that is layer 2 head 0 (a planted "fused-low"
-- pair: W_Q has a few strong directions and a weak tail); on a model whose W_Q heads are all flat
-- the captions say so. Writes five PNGs into OUTDIR and prints what each one shows.

local out = arg[1] or error("usage: attnlab scripts/seed000_head.lua OUTDIR [MODEL]")
local model = arg[2] or "demo-r1"
local lib = dofile((arg[0]:match("^(.*)/") or ".") .. "/seed000_lib.lua")

attn.load(model)
attn.set("plot.size", "1200x800")

-- The head: lowest W_Q rank at tau 0.99 over every layer and query head.
local info = attn.info()
local function field(name)
  if info[name] ~= nil then return info[name] end
  for _, r in ipairs(info) do if r.field == name then return r.value end end
end
local n_layers, n_heads = tonumber(field("layers")), tonumber(field("heads"))
local layer, head, sigma
for L = 0, n_layers - 1 do
  for H = 0, n_heads - 1 do
    local s = lib.sigma(attn.spectrum("q", { layer = L, head = H }))
    if not sigma or lib.rank(s, 0.99) < lib.rank(sigma, 0.99) then layer, head, sigma = L, H, s end
  end
end
local p, r99, r999 = #sigma, lib.rank(sigma, 0.99), lib.rank(sigma, 0.999)
local tail = r99 <= 0.75 * p      -- a weak tail worth dropping
local tail_note = tail and ("%d strong directions hold 99%% of the energy, then a weak tail of %d"):format(r99, p - r99)
  or ("flat: %d of %d directions needed for 99%% of the energy -- no weak tail in this model's W_Q heads"):format(r99, p)

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

-- 1.3: the two factors, the spectrum, and Vt scaled by sigma.
fig("1.3a_wqa_t.png", "Uᵀ of W_Q: one row per singular direction, the input directions the head reads",
    "heatmap", "q", with(at, { factor = "a" }))
fig("1.3b_wqb.png", "Vt of W_Q: the directions of head space it writes, sorted by sigma",
    "heatmap", "q", with(at, { factor = "b" }))
fig("1.3c_spectrum.png", "singular values of W_Q: " .. tail_note, "spectrum", "q", with(at))
fig("1.3d_wqb_scaled.png", tail and ("diag(sigma) Vt: the %d rows past rank %d fade to white -- what truncation drops")
    :format(p - r99, r99) or "diag(sigma) Vt: every row keeps its colour -- truncation would drop energy here",
    "heatmap", "q", with(at, { factor = "scaled" }))

-- 1.4: cumulative energy and the effective rank at tau = 0.99 and 0.999.
fig("1.4_energy.png", ("cumulative energy of W_Q: rank %d at tau 0.99, %d at 0.999 (of %d)"):format(r99, r999, p),
    "energy", "q", with(at))

print(("seed 000 sections 1.3-1.4 on %s, layer %d query head %d (the most concentrated W_Q of %d x %d heads): "
  .. "%d figures in %s"):format(model, layer, head, n_layers, n_heads, #figures, out))
for _, f in ipairs(figures) do print(("  %s\n      %s"):format(f.path, f.caption)) end
