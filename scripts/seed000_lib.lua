-- seed000_lib.lua -- what the seed 000 notebooks (seed000_*.lua, farr_cases.lua) share: reading
-- a spectrum, effective ranks, and the layer cases of section 2.3 found in the data, so that a
-- notebook picks its layers and writes its captions from the model it is given.
--
--   local lib = dofile((arg[0]:match("^(.*)/") or ".") .. "/seed000_lib.lua")

local M = {}

-- The singular values of attn.spectrum's result (an array of sigma, or rows / columns with sigma).
function M.sigma(sp)
  if type(sp[1]) == "number" then return sp end
  if type(sp.sigma) == "table" then return sp.sigma end
  local s = {}
  for i, r in ipairs(sp) do s[i] = r.sigma end
  return s
end

-- The smallest r whose first r singular values hold tau of the energy (sum sigma^2).
function M.rank(s, tau)
  local tot, c = 0, 0
  for _, v in ipairs(s) do tot = tot + v * v end
  for i, v in ipairs(s) do
    c = c + v * v
    if c >= tau * tot then return i end
  end
  return #s
end

-- The case of one head's V / O / fused VO ranks (a row of `ranks vo`), head dim d:
--   bottleneck  the fused rank is held down by one low-rank factor (rank VO ~ min(rank V, rank O))
--   fused-low   V and O are both high rank but their product is not ("only low when fused")
--   high        the fused map is (near) full rank: FaRR saves nothing here
function M.classify(r, d)
  local lo = math.min(r.rank_v, r.rank_o)
  if r.rank_vo >= 0.9 * d then return "high" end
  if r.rank_vo >= lo - 2 then return "bottleneck" end
  return "fused-low"
end

-- Every layer's VO heads, classified: layers[L] = {heads = rows, count = {case = n}, max = the
-- largest fused rank}; order lists the layers; d is the head dim (the rank cap).
function M.layer_cases(tau)
  local d = #M.sigma(attn.spectrum("v", {layer = 0, head = 0}))
  local layers, order = {}, {}
  for _, r in ipairs(attn.ranks("vo", "all", {tau = tau})) do
    local L = layers[r.layer]
    if not L then
      L = {heads = {}, count = {bottleneck = 0, ["fused-low"] = 0, high = 0}, max = 0}
      layers[r.layer] = L
      order[#order + 1] = r.layer
    end
    r.case = M.classify(r, d)
    L.heads[#L.heads + 1] = r
    L.count[r.case] = L.count[r.case] + 1
    L.max = math.max(L.max, r.rank_vo)
  end
  return layers, order, d
end

-- The layer that shows a case best: the most heads of that case (ties: the earliest), or nil.
function M.best(layers, order, case)
  local pick, n = nil, 0
  for _, l in ipairs(order) do
    if layers[l].count[case] > n then pick, n = l, layers[l].count[case] end
  end
  return pick
end

-- The layer mixing the two low cases most evenly (both present), or nil.
function M.mixed(layers, order)
  local pick, n = nil, 0
  for _, l in ipairs(order) do
    local c = layers[l].count
    local k = math.min(c.bottleneck, c["fused-low"])
    if k > n then pick, n = l, k end
  end
  return pick
end

-- The head of a layer with the lowest fused rank (ties: the lowest head number).
function M.lowest_head(layer)
  local pick
  for _, r in ipairs(layer.heads) do
    if not pick or r.rank_vo < pick.rank_vo then pick = r end
  end
  return pick
end

return M
