-- plot_xy.lua -- plot a statistic the notebook computes itself (issue 31, section 1).
--
--   attnlab examples/plot_xy.lua OUTDIR [MODEL]        (default demo-r1)
--
-- attn.ranks gives one row per head ({layer, head, rank_v, rank_o, rank_vo}); no built-in figure
-- draws "the spread of the fused rank over a layer's heads" or "the fraction of heads below half the
-- head dim", so the notebook computes them per layer and draws them with attn.plot("xy", ...):
-- several series with names, markers and dashes, error bars (the standard deviation over heads),
-- a log axis, then `replot` (the last figure with a changed option) and a 2x1 panel figure.
-- Says each file it writes ("wrote FILE").

local out = arg[1] or error("usage: attnlab examples/plot_xy.lua OUTDIR [MODEL]")
local model = arg[2] or "demo-r1"
attn.load(model)
local head_dim = attn.info().head_dim or 32

-- per layer: mean, sd, min and max of the fused VO rank over heads, and the share of low heads
local rows = attn.ranks("vo", {layer = "all"})
local by = {}
for _, r in ipairs(rows) do
  by[r.layer] = by[r.layer] or {}
  table.insert(by[r.layer], r.rank_vo)
end
local L, mean, sd, lo, hi, low = {}, {}, {}, {}, {}, {}
for l = 0, #by do
  local v = by[l]
  if v then
    local s, s2, mn, mx, k = 0, 0, math.huge, -math.huge, 0
    for _, x in ipairs(v) do
      s, s2 = s + x, s2 + x * x
      mn, mx = math.min(mn, x), math.max(mx, x)
      if x < head_dim / 2 then k = k + 1 end
    end
    local m = s / #v
    table.insert(L, l)
    table.insert(mean, m)
    table.insert(sd, math.sqrt(math.max(0, s2 / #v - m * m)))
    table.insert(lo, mn)
    table.insert(hi, mx)
    table.insert(low, k / #v)
  end
end

attn.plot("xy", {
  series = {
    {x = L, y = mean, yerr = sd, name = "mean over heads (± sd)", marker = "dot"},
    {x = L, y = lo, name = "min", marker = "triangle", dash = 2},
    {x = L, y = hi, name = "max", marker = "square", dash = 3},
  },
  title = model .. ": fused VO rank per layer (τ = " .. attn.get("tau") .. ")",
  xlabel = "layer", ylabel = "effective rank of W_V W_O",
  to = out .. "/vo_rank_by_layer.png"})

-- the same figure on a log y axis, as an SVG: replot keeps everything else
attn.run("replot logy to " .. out .. "/vo_rank_by_layer_log.svg")
attn.plot("xy", {series = {{x = L, y = low, name = "heads below head_dim / 2"}},
                            style = "both", yrange = "-0.03:1.05", title = model .. ": share of low-rank heads",
                            xlabel = "layer", ylabel = "fraction of heads", to = out .. "/low_heads.png"})

attn.plot("panels", "2x1", {figures = {
  "plot vo-ranks layer 1 title 'layer 1: V, O, VO'",
  "plot energy vo layer 1 head 0 title 'layer 1 head 0: energy'"},
  to = out .. "/panels.png"})
