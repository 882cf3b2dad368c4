-- seed000_grids.lua -- seed 000 section 2.4 on demo-r1: the model-wide view.
--
--   attnlab scripts/seed000_grids.lua OUTDIR [MODEL]
--
-- The grids of V / O / fused VO and Q / K / fused QK effective ranks, one panel per layer,
-- heads sorted by fused rank (at 99.9% energy, capped at the head dim), plus the per-layer
-- minimum / median / maximum fused rank against depth: the maximum is the uniform rank a
-- per-layer truncation keeps (section 2.4's "practical challenge": one high-rank head sets the
-- size for the whole layer). QK is fused on the NoPE columns (MLA's partial RoPE).
-- Writes four PNGs into OUTDIR and prints what each one shows.

local out = arg[1] or error("usage: attnlab scripts/seed000_grids.lua OUTDIR [MODEL]")
local model = arg[2] or "demo-r1"

attn.load(model)
attn.set("plot.size", "1400x1000")

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

fig("value-output heads of every layer: V, O and fused VO ranks",
    "vo-ranks", "all", { to = out .. "/2.4_vo_grid.png" })
fig_qk("query-key heads of every layer (NoPE part): Q, K and fused QK ranks",
    "qk-ranks", "all", { to = out .. "/2.4_qk_grid.png" })
attn.set("plot.size", "1200x800")
fig("fused VO rank per layer: min / median / max (max = the uniform per-layer rank)",
    "ranks-by-layer", "vo", { to = out .. "/2.4_vo_by_layer.png" })
fig_qk("fused QK rank per layer: min / median / max",
    "ranks-by-layer", "qk", { to = out .. "/2.4_qk_by_layer.png" })

print(("seed 000 section 2.4 on %s: %d figures in %s"):format(model, #figures, out))
for _, f in ipairs(figures) do print(("  %s\n      %s"):format(f.path, f.caption)) end
for _, why in ipairs(skipped) do print("  skipped " .. why) end
