-- seed000_grids.lua -- seed 000 section 2.4: the model-wide view.
--
--   attnlab scripts/seed000_grids.lua OUTDIR [MODEL]        (default demo-r1)
--
-- The grids of V / O / fused VO and Q / K / fused QK effective ranks, one panel per layer,
-- heads sorted by fused rank (at 99.9% energy, capped at the head dim), plus the per-layer
-- minimum / median / maximum fused rank against depth: the maximum is the uniform rank a
-- per-layer truncation keeps (section 2.4's "practical challenge": one high-rank head sets the
-- size for the whole layer). QK is fused on the NoPE columns where RoPE is partial (MLA) and
-- refused on full-RoPE models (seed A.3: the QK figures are then skipped with the reason).
-- Captions give the ranks found. Writes up to four PNGs into OUTDIR and prints what each shows.

local out = arg[1] or error("usage: attnlab scripts/seed000_grids.lua OUTDIR [MODEL]")
local model = arg[2] or "demo-r1"
local lib = dofile((arg[0]:match("^(.*)/") or ".") .. "/seed000_lib.lua")

attn.load(model)
attn.set("plot.size", "1400x1000")
local tau = 0.999

-- "fused VO 4-32 of 32 over 48 heads; per-layer max 4-32" from the rank table of a pair (nil
-- where the pair is refused).
local function summary(pair)
  local ok, rows = pcall(attn.ranks, pair, "all", { tau = tau })
  if not ok then return nil end
  local col, lo, hi, maxes = "rank_" .. pair, 1e9, 0, {}
  for _, r in ipairs(rows) do
    lo, hi = math.min(lo, r[col]), math.max(hi, r[col])
    maxes[r.layer] = math.max(maxes[r.layer] or 0, r[col])
  end
  local mlo, mhi = 1e9, 0
  for _, m in pairs(maxes) do mlo, mhi = math.min(mlo, m), math.max(mhi, m) end
  local d = #lib.sigma(attn.spectrum(pair, { layer = 0, head = 0 }))
  return ("fused %s %d-%d over %d heads, per-layer max %d-%d, at most %d"):format(pair:upper(), lo, hi, #rows,
    mlo, mhi, d)
end
local vo, qk = summary("vo"), summary("qk")

local figures, skipped = {}, {}
local function fig(caption, ...)
  figures[#figures + 1] = { path = attn.plot(...), caption = caption }
end
-- QK figures are refused on full-RoPE models (seed A.3): note it and go on.
local function fig_qk(caption, ...)
  local ok, err = pcall(fig, caption, ...)
  if not ok then
    local why = tostring(err):gsub("^.-attn.plot: ", "")
    skipped[#skipped + 1] = caption .. " -- " .. (why:match("^(.-), ") or why)
  end
end

fig("value-output heads of every layer: V, O and fused VO ranks (" .. vo .. ")",
    "vo-ranks", "all", { tau = tau, to = out .. "/2.4_vo_grid.png" })
fig_qk("query-key heads of every layer (NoPE part): Q, K and fused QK ranks" .. (qk and (" (" .. qk .. ")") or ""),
    "qk-ranks", "all", { tau = tau, to = out .. "/2.4_qk_grid.png" })
attn.set("plot.size", "1200x800")
fig("fused VO rank per layer: min / median / max (max = the uniform per-layer rank; " .. vo .. ")",
    "ranks-by-layer", "vo", { tau = tau, to = out .. "/2.4_vo_by_layer.png" })
fig_qk("fused QK rank per layer: min / median / max (max = the uniform per-layer rank" .. (qk and ("; " .. qk) or "")
       .. ")", "ranks-by-layer", "qk", { tau = tau, to = out .. "/2.4_qk_by_layer.png" })

print(("seed 000 section 2.4 on %s (ranks at tau %g): %d figures in %s"):format(model, tau, #figures, out))
for _, f in ipairs(figures) do print(("  %s\n      %s"):format(f.path, f.caption)) end
for _, why in ipairs(skipped) do print("  skipped " .. why) end
