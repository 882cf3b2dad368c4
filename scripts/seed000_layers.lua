-- seed000_layers.lua -- seed 000 section 2.3 on demo-r1: the three kinds of layer.
--
--   attnlab scripts/seed000_layers.lua OUTDIR [MODEL]
--
-- Per-layer V / O / fused VO effective ranks, heads sorted by fused rank (the seed's DeepSeek-R1
-- layers 8, 2 and 28). demo-r1 plants each case:
--   layer 1  the bottleneck effect: even heads have a V of exact rank 6, so the fused rank
--            cannot exceed 6 while O stays full rank; odd heads are flat (full rank).
--   layer 2  only low when fused: V and O are each high rank (31 of 32 at 99.9%), but their
--            weak directions meet, so the fused VO has rank 4.
--   layer 0  the common case: random weights, V, O and VO all near full rank.
-- Layer 3 mixes the first two within one layer, like the seed's early R1 layers (2.4).
-- Writes one PNG per layer (and the layer-2 energy of one fused head) into OUTDIR.

local out = arg[1] or error("usage: attnlab scripts/seed000_layers.lua OUTDIR [MODEL]")
local model = arg[2] or "demo-r1"

attn.load(model)
attn.set("plot.size", "1200x800")

local cases = {
  { layer = 1, name = "2.3_case1_bottleneck.png",
    caption = "bottleneck: low-rank V heads drag the fused rank down; O stays full rank" },
  { layer = 2, name = "2.3_case2_low_when_fused.png",
    caption = "only low when fused: V and O both high rank, fused VO rank 4" },
  { layer = 0, name = "2.3_case3_full_rank.png",
    caption = "the common case: V, O and fused VO all near full rank" },
  { layer = 3, name = "2.3_mixed_split.png",
    caption = "a split layer: half the heads bottlenecked by V, half low only when fused" },
}

local figures = {}
for _, c in ipairs(cases) do
  local path = attn.plot("vo-ranks", { layer = c.layer, to = out .. "/" .. c.name })
  figures[#figures + 1] = { path = path, caption = ("layer %d -- %s"):format(c.layer, c.caption) }
end
-- Why case 2 is low: the fused spectrum of one head falls off a cliff after 4 values.
local path = attn.plot("energy", "vo", { layer = 2, head = 0, to = out .. "/2.3_case2_energy_vo.png" })
figures[#figures + 1] = { path = path, caption = "layer 2 head 0 -- fused VO energy: rank 4 at both tau" }

print(("seed 000 section 2.3 on %s: %d figures in %s"):format(model, #figures, out))
for _, f in ipairs(figures) do print(("  %s\n      %s"):format(f.path, f.caption)) end
