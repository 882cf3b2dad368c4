-- attention.lua -- what a head does on real text, on stories260K (examples/README's section "A head on
-- real text"):  attnlab examples/attention.lua MODEL OUTDIR [TEXTFILE]
-- Prints the token strings of a sentence, one head's top keys, the ablation of every head of a layer,
-- and draws three figures into OUTDIR: the head's pattern, the pattern before / after a VO truncation,
-- and each head's perplexity rise beside its VO rank.
local model, dir = arg[1], arg[2]
local text = arg[3] or "examples/tinystory.txt"
assert(model and dir, "usage: attnlab examples/attention.lua MODEL OUTDIR [TEXTFILE]")
attn.load(model)
local sentence = "Once upon a time, there was a little girl named Lily."

-- token strings: they concatenate back to the sentence
local parts = {}
for i, r in ipairs(attn.tokenize(sentence, {strings = true, raw = true})) do
  if i > 1 then parts[#parts + 1] = r.string end
end
print("strings round-trip: " .. tostring(table.concat(parts) == sentence))

-- one head's pattern: each query's strongest key
for _, r in ipairs(attn.attend(sentence, {layer = 1, head = 2, top = 1})) do
  print(string.format("  %2d %-8s -> %s", r.pos, r.token, r.top))
end

-- which heads of layer 2 the model needs
local rows = attn.ablate(text, {layer = 2, seqlen = 128})
table.sort(rows, function(a, b) return a.delta > b.delta end)
print(string.format("layer 2: removing head %s costs the most (+%.4f ppl), head %s the least (+%.4f)",
                    rows[1].heads, rows[1].delta, rows[#rows].heads, rows[#rows].delta))

local figs = {}
figs[#figs + 1] = attn.plot("attention", sentence, {layer = 1, head = 2, to = dir .. "/attention.png"})
attn.truncate("vo", {rank = 2})
figs[#figs + 1] = attn.plot("attention", "file", text, {["max-tokens"] = 40, layer = 3, head = 1, compare = true,
                                                        to = dir .. "/attention-compare.png"})
figs[#figs + 1] = attn.plot("head-importance", text, {seqlen = 128, tau = 0.9, to = dir .. "/head-importance.png"})
print(#figs .. " figures in " .. dir)
for _, f in ipairs(figs) do print("  " .. f) end
