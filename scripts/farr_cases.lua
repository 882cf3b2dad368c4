-- farr_cases.lua -- seed 000, section 2.3: the three layer cases of FaRR, found and printed.
--
--   attnlab scripts/farr_cases.lua [MODEL] [TAU]       (default demo-r1, 0.999)
--
-- For every layer it classifies each head's V / O / fused VO effective ranks (seed000_lib.lua):
--   bottleneck  the fused rank is held down by one low-rank factor (rank VO ~ min(rank V, rank O))
--   fused-low   V and O are both high rank but their product is not ("only low when fused")
--   high        the fused map is (near) full rank: FaRR saves nothing here
-- then prints, like the seed's plots, the heads of the layer that best shows each case, sorted
-- by fused rank, and what a layer-max truncation of that layer would save.

local model = arg and arg[1] or "demo-r1"
local tau = tonumber(arg and arg[2]) or 0.999

attn.load(model)
attn.set("tau", tau)

local lib = dofile((arg[0]:match("^(.*)/") or ".") .. "/seed000_lib.lua")
local layers, order, d = lib.layer_cases(tau)

print(string.format("%s: VO effective ranks at tau %g (head dim %d), heads per case", model, tau, d))
print("layer  bottleneck  fused-low  high  max fused rank")
for _, l in ipairs(order) do
  local L = layers[l]
  print(string.format("%5d  %10d  %9d  %4d  %14d", l, L.count.bottleneck, L.count["fused-low"], L.count.high, L.max))
end

local cases = {
  {"bottleneck", "Case 1: the bottleneck effect (one low-rank factor drags the fused rank down)"},
  {"fused-low", "Case 2: only low when fused (V and O high rank, VO low)"},
  {"high", "The common case: high-rank layers (FaRR offers nothing)"},
}
for _, c in ipairs(cases) do
  local l = lib.best(layers, order, c[1])
  print()
  if not l then
    print(c[2] .. ": no such layer in " .. model)
  else
    print(string.format("%s -- layer %d", c[2], l))
    local heads = {}
    for _, r in ipairs(layers[l].heads) do heads[#heads + 1] = r end
    table.sort(heads, function(a, b) return a.rank_vo < b.rank_vo or (a.rank_vo == b.rank_vo and a.head < b.head) end)
    print("  head  rank_v  rank_o  rank_vo  case")
    for _, r in ipairs(heads) do
      print(string.format("  %4d  %6d  %6d  %7d  %s", r.head, r.rank_v, r.rank_o, r.rank_vo, r.case))
    end
    local _, total = attn.truncate("vo", {tau = tau, layers = tostring(l), policy = "layer-max"})
    print(string.format("  layer-max truncation at tau %g: rank %d, parameters %d -> %d (%.1f%% fewer), "
      .. "min energy kept %.6f", tau, total.rank_max, total.params_before, total.params_after,
      100 * (1 - total.params_after / total.params_before), total.energy_min))
  end
end
