-- info_demos.lua -- the architecture and KV-cache cost of each demo model, side by side.
--
--   attnlab scripts/info_demos.lua [MODEL ...]        (default: demo-r1 demo-llama demo-gpt2)
--
-- Shows the shell's Lua side: attn.load returns the session name, attn.info() returns one table
-- keyed by field (attn.info().layers), attn.run runs any command line and returns its result, and keyword
-- arguments go in a trailing table (attn.models({to = "models.csv"})); attn.quiet(true) drops the
-- commands' narration.

attn.quiet(true)     -- results only: no "loaded ..." lines

local names = {}
for i = 1, #arg do names[#names + 1] = arg[i] end
if #names == 0 then names = {"demo-r1", "demo-llama", "demo-gpt2"} end

-- info: one table keyed by field
local function info_of(name)
  attn.use(name)
  return attn.info()
end

local fields = {
  {"family", "family"}, {"layers", "layers"}, {"heads", "heads"}, {"kv_heads", "KV heads"},
  {"hidden", "hidden"}, {"qk_nope_head_dim", "qk nope"}, {"qk_rope_head_dim", "qk rope"},
  {"v_head_dim", "v dim"}, {"kv_lora_rank", "kv latent"}, {"dtype", "dtype"},
  {"attn_params_per_layer", "attn params/layer"},
  {"kv_values_per_token_per_layer", "KV values/token/layer"},
  {"kv_bytes_per_token_per_layer", "KV bytes/token/layer"}, {"kv_cache_dtype", "KV cache dtype"},
}

local infos = {}
for i, name in ipairs(names) do
  infos[i] = info_of(attn.load(name))
end

-- one row per field, one column per model
local w = 22
io.write(string.format("%-" .. w .. "s", ""))
for _, name in ipairs(names) do io.write(string.format("%14s", name)) end
io.write("\n")
for _, f in ipairs(fields) do
  io.write(string.format("%-" .. w .. "s", f[2]))
  for i = 1, #names do io.write(string.format("%14s", tostring(infos[i][f[1]]))) end
  io.write("\n")
end

-- the same through attn.run, and a table result reused as a Lua value
local loaded = attn.run("models")
print(string.format("\n%d models loaded; current: %s", #loaded, (function()
  for _, m in ipairs(loaded) do if m.current then return m.name end end
end)()))
