-- seed000_layers.lua -- seed 000 section 2.3: the three kinds of layer, found in the model.
--
--   attnlab scripts/seed000_layers.lua OUTDIR [MODEL]        (default demo-r1)
--
-- Per-layer V / O / fused VO effective ranks, heads sorted by fused rank (the seed's DeepSeek-R1
-- layers 8, 2 and 28). Every layer's heads are classified from their ranks (seed000_lib.lua):
--   bottleneck     a low-rank V (or O) holds the fused rank down; the other factor stays high
--   fused-low      V and O are each high rank, but their weak directions meet: VO is low
--   high           V, O and VO all near full rank (the common case)
-- and for each case the layer with the most such heads is drawn, plus a layer mixing the two low
-- cases (the seed's early R1 layers, 2.4) and the fused energy of the lowest head of the
-- fused-low layer. A case the model does not have is said, not drawn (demo-r1 plants all of them:
-- layers 1, 2, 0 and 3). Captions give the ranks found.

local out = arg[1] or error("usage: attnlab scripts/seed000_layers.lua OUTDIR [MODEL]")
local model = arg[2] or "demo-r1"
local lib = dofile((arg[0]:match("^(.*)/") or ".") .. "/seed000_lib.lua")

attn.load(model)
attn.set("plot.size", "1200x800")
local tau = 0.999
local layers, order, d = lib.layer_cases(tau)

-- "V 6, O 32, VO 6" ranges over the heads of case `case` in layer l.
local function ranges(l, case)
  local lo, hi = {}, {}
  for _, r in ipairs(layers[l].heads) do
    if not case or r.case == case then
      for _, k in ipairs({"rank_v", "rank_o", "rank_vo"}) do
        lo[k] = math.min(lo[k] or 1e9, r[k])
        hi[k] = math.max(hi[k] or 0, r[k])
      end
    end
  end
  local function one(k) return lo[k] == hi[k] and tostring(lo[k]) or (lo[k] .. "-" .. hi[k]) end
  return ("V %s, O %s, fused VO %s of %d"):format(one("rank_v"), one("rank_o"), one("rank_vo"), d)
end

local cases = {
  { pick = lib.best(layers, order, "bottleneck"), name = "2.3_case1_bottleneck.png", case = "bottleneck",
    what = "bottleneck: a low-rank factor drags the fused rank down" },
  { pick = lib.best(layers, order, "fused-low"), name = "2.3_case2_low_when_fused.png", case = "fused-low",
    what = "only low when fused: V and O high rank, fused VO low" },
  { pick = lib.best(layers, order, "high"), name = "2.3_case3_full_rank.png", case = "high",
    what = "the common case: V, O and fused VO near full rank" },
  { pick = lib.mixed(layers, order), name = "2.3_mixed_split.png",
    what = "a split layer: heads bottlenecked by a factor beside heads low only when fused" },
}

local figures, missing = {}, {}
for _, c in ipairs(cases) do
  if c.pick then
    local l, L = c.pick, layers[c.pick]
    local path = attn.plot("vo-ranks", { layer = l, tau = tau, to = out .. "/" .. c.name })
    local caption = c.case and ("layer %d -- %s (%d of %d heads: %s)"):format(l, c.what, L.count[c.case],
      #L.heads, ranges(l, c.case))
      or ("layer %d -- %s (%d bottleneck, %d fused-low heads)"):format(l, c.what, L.count.bottleneck,
      L.count["fused-low"])
    figures[#figures + 1] = { path = path, caption = caption }
  else
    missing[#missing + 1] = c.what
  end
end
-- Why case 2 is low: the fused spectrum of its lowest head falls off a cliff.
local low = cases[2].pick
if low then
  local r = lib.lowest_head(layers[low])
  local s = lib.sigma(attn.spectrum("vo", { layer = low, head = r.head }))
  local path = attn.plot("energy", "vo", { layer = low, head = r.head, to = out .. "/2.3_case2_energy_vo.png" })
  figures[#figures + 1] = { path = path, caption = ("layer %d head %d -- fused VO energy: rank %d at tau 0.99, "
    .. "%d at 0.999 (V %d, O %d)"):format(low, r.head, lib.rank(s, 0.99), lib.rank(s, 0.999), r.rank_v, r.rank_o) }
end

print(("seed 000 section 2.3 on %s (VO ranks at tau %g): %d figures in %s"):format(model, tau, #figures, out))
for _, f in ipairs(figures) do print(("  %s\n      %s"):format(f.path, f.caption)) end
for _, what in ipairs(missing) do print(("  no layer of this kind in %s: %s"):format(model, what)) end
