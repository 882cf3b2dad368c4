-- check_layers.lua -- the layer rules of ARCHITECTURE.md, checked on the sources and the built
-- objects: no include or call cycles between files, each folder calls only the folders below it,
-- no command group includes another group's header, core/ never prints or exits, config.json is
-- parsed in one module (core/model/config.c), each exported function of core/ carries its module's prefix,
-- no function takes more than MAX_PARAMS parameters.
--
-- usage: lua5.4 tests/check_layers.lua SRC_DIR BUILD_DIR
-- A module is one file pair (core/model/model.c + .h -> "core/model/model"; model_internal.h, the part
-- only tests use, belongs to it too). Edges: a module includes
-- another's header, or its object references a symbol defined by another's object (nm).
-- Prints one line per violation and "layers: N violations"; exits 1 when there is any.

local src, build = arg[1], arg[2]
assert(src and build, "usage: lua5.4 check_layers.lua SRC_DIR BUILD_DIR")

-- The folders bottom to top (the layer picture): each may use itself and the ones before it.
-- core/ is eight of them: base (errors, tensors) < io (files) < linalg < model (the model
-- description, forward pass) < analysis < methods < export < lint.
local FOLDERS = { "core/base", "core/io", "core/linalg", "core/model", "core/analysis", "core/methods",
                  "core/export", "core/lint", "plots", "commands", "repl" }
local MAY_USE = {}
for i, d in ipairs(FOLDERS) do
  MAY_USE[d] = {}
  for j = 1, i - 1 do MAY_USE[d][FOLDERS[j]] = true end
end
local function in_core(dir) return dir:match("^core/") ~= nil end
-- calls that print or end the process: core/ returns errors instead
local CORE_FORBIDDEN = { printf = 1, puts = 1, putchar = 1, exit = 1, _exit = 1, perror = 1, abort = 1 }

local violations = {}
local function violation(fmt, ...) violations[#violations + 1] = string.format(fmt, ...) end

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  return t
end

-- ---------------------------------------------------------------- modules and include edges
local modules, header_owner = {}, {}       -- "core/model" -> { files = {...} }; "model.h" -> module
local edges = {}                            -- module -> { module -> "why" }
local function edge(a, b, why)
  if a == b then return end
  edges[a] = edges[a] or {}
  if not edges[a][b] then edges[a][b] = why end
end

for _, dir in ipairs(FOLDERS) do
  for _, path in ipairs(lines_of(string.format("ls %s/%s 2>/dev/null", src, dir))) do
    local base, ext = path:match("^(.*)%.([ch])$")
    if base then
      base = base:gsub("_internal$", "")   -- x_internal.h (what only tests use) belongs to module x
      local mod = dir .. "/" .. base
      modules[mod] = modules[mod] or { dir = dir, files = {} }
      table.insert(modules[mod].files, dir .. "/" .. path)
      if ext == "h" then
        if header_owner[path] then violation("two headers named %s: %s and %s", path, header_owner[path], mod) end
        header_owner[path] = mod
      end
    end
  end
end

local function group_of(mod)   -- command group of commands/cmd_<group>[_...]: nil for other modules
  return mod:match("^commands/cmd_([a-z0-9]+)")
end

for mod, m in pairs(modules) do
  for _, file in ipairs(m.files) do
    local f = assert(io.open(src .. "/" .. file))
    for line in f:lines() do
      if line:find("cJSON_Parse", 1, true) and line:find("config_json", 1, true) and file ~= "core/model/config.c" then
        violation("%s parses config.json text again: read the model description (core/model/config.h) or model_config_tree", file)
      end
      local inc = line:match('^%s*#%s*include%s+"([^"]+)"')
      if inc then
        local owner = header_owner[inc:match("[^/]+$")]
        if owner then
          edge(mod, owner, "includes " .. inc)
          local g, h = group_of(mod), group_of(owner)
          if g and h and g ~= h then violation("%s includes the %s command group's header %s", file, h, inc) end
        end
      end
    end
    f:close()
  end
end

-- ---------------------------------------------------------------- call edges from the objects
local defined, undefined, exported = {}, {}, {}   -- symbol -> module; module -> { symbols } (exported: functions)
local objs = lines_of(string.format("find %s/CMakeFiles -path '*.dir/*' -name '*.c.o' 2>/dev/null", build))
local seen_obj = {}
for _, o in ipairs(objs) do
  local dir, base = o:match("%.dir/([a-z/]+)/([%w_]+)%.c%.o$")
  local mod = dir and (dir .. "/" .. base)
  if mod and modules[mod] and not seen_obj[mod] then
    seen_obj[mod] = true
    for _, l in ipairs(lines_of("nm " .. o)) do
      local kind, sym = l:match("^%x*%s+(%a)%s+(%S+)$")
      if kind and kind:match("[TDBRGSV]") then
        defined[sym] = defined[sym] or mod
        if kind == "T" then exported[mod] = exported[mod] or {}; table.insert(exported[mod], sym) end
      elseif kind == "U" then
        undefined[mod] = undefined[mod] or {}
        table.insert(undefined[mod], sym)
      end
    end
  end
end
local nobj = 0
for _ in pairs(seen_obj) do nobj = nobj + 1 end
if nobj == 0 then violation("no object files under %s/CMakeFiles: build first", build) end

for mod, syms in pairs(undefined) do
  for _, sym in ipairs(syms) do
    local owner = defined[sym]
    if owner then edge(mod, owner, "calls " .. sym) end
    if in_core(modules[mod].dir) and CORE_FORBIDDEN[sym] then
      violation("%s calls %s: core/ returns errors and never prints or exits", mod, sym)
    end
  end
end

-- ---------------------------------------------------------------- a function's prefix names its module
-- In core/, each exported function's name starts with its module's name ("spectra_svd" in
-- core/linalg/spectra), with a word that begins it ("tok_" in tokenizer, "budget_" in budget_compare),
-- or with one of the module's declared prefixes below. EXCEPTIONS are today's functions that live
-- outside the module their prefix names (to move, not to copy).
local PREFIXES = {
  ["core/base/tensor"] = { "dt", "mat", "matd", "vec" },
  ["core/io/safetensors"] = { "st" },
  ["core/linalg/matmul"] = { "mm", "wmat" },
  ["core/linalg/gram_bf16"] = { "gbf" },
  ["core/linalg/spectra"] = { "spectrum" },   -- Spectrum's own: spectrum_new, spectrum_free, ...
  ["core/analysis/spectral_stats"] = { "sstats" },
  ["core/model/config"] = { "cfg", "model_config", "model_family", "mlp_kind", "norm_kind", "qk_norm", "rope_layout",
                            "rope_scaling" },   -- the enum names of its description
  ["core/model/family"] = { "role", "tensor_role" },   -- tensor roles are the family table's
  ["core/model/forward"] = { "fwd" },
  ["core/model/analyses"] = { "analysis" },
  ["core/methods/check_inputs"] = { "ci" },
  ["core/methods/synth"] = { "synlist" },
  ["core/methods/transmla"] = { "tmla" },
  ["core/methods/tmla_study"] = { "tstudy" },
  ["core/methods/mla_strategy"] = { "mlastrat" },
}
local EXCEPTIONS = {
  ["core/model/model"] = { "cfg_attn_params", "cfg_kv_values" },          -- cfg_: core/model/config
  ["core/model/rope"] = { "attn_head_causal", "attn_softmax_row", "attn_softmax_row_sink", "attn_softmax_row_stream" },       -- the attention core beside RoPE
  ["core/export/export"] = { "farr_export", "farr_is_export", "farr_dense_check", "farr_dense_check_free" },
}
local function prefix_ok(mod, sym)
  local base = mod:match("[^/]+$")
  if sym == base or sym:sub(1, #base + 1) == base .. "_" then return true end
  local word = sym:match("^([%l%d]+)_") or sym
  if #word >= 2 and base:sub(1, #word) == word then return true end
  for _, p in ipairs(PREFIXES[mod] or {}) do if sym:sub(1, #p + 1) == p .. "_" then return true end end
  for _, e in ipairs(EXCEPTIONS[mod] or {}) do if sym == e then return true end end
  return false
end
for mod, syms in pairs(exported) do
  if in_core(modules[mod].dir) then
    for _, sym in ipairs(syms) do
      if not prefix_ok(mod, sym) then
        violation("%s defines %s: a function's prefix names the module it lives in (tests/check_layers.lua PREFIXES)",
                  mod, sym)
      end
    end
  end
end

-- ---------------------------------------------------------------- arguments that travel together
-- No function takes more than MAX_PARAMS positional parameters: the ones that travel together go in a
-- struct (AttnHeadJob, KqLayerIn, GroupProjIn). Definitions start at column 0 (the house style).
local MAX_PARAMS = 13
local function count_params(list)
  if list:match("^%s*void%s*$") or list:match("^%s*$") then return 0 end
  local n, depth = 1, 0
  for ch in list:gmatch(".") do
    if ch == "(" or ch == "[" then depth = depth + 1
    elseif ch == ")" or ch == "]" then depth = depth - 1
    elseif ch == "," and depth == 0 then n = n + 1 end
  end
  return n
end
for mod, m in pairs(modules) do
  for _, file in ipairs(m.files) do
    if file:match("%.c$") then
      local f = assert(io.open(src .. "/" .. file))
      local text = "\n" .. f:read("a")
      f:close()
      for name, list in text:gmatch("\n[%a_][%w_ %*]-[%s%*]([%a_][%w_]*)(%b())%s*{") do
        local n = count_params(list:sub(2, -2))
        if n > MAX_PARAMS then
          violation("%s: %s takes %d parameters (at most %d): gather the ones that travel together in a struct",
                    file, name, n, MAX_PARAMS)
        end
      end
    end
  end
end

-- ---------------------------------------------------------------- layer rules
for a, outs in pairs(edges) do
  for b, why in pairs(outs) do
    local da, db = modules[a].dir, modules[b].dir
    if da ~= db and not MAY_USE[da][db] then violation("%s %s (%s): %s/ may not use %s/", a, why, b, da, db) end
  end
end

-- ---------------------------------------------------------------- cycles (Tarjan's SCC)
local index, low, onstack, stack, counter = {}, {}, {}, {}, 0
local function strong(v)
  counter = counter + 1
  index[v], low[v] = counter, counter
  stack[#stack + 1] = v
  onstack[v] = true
  for w in pairs(edges[v] or {}) do
    if not index[w] then strong(w); low[v] = math.min(low[v], low[w])
    elseif onstack[w] then low[v] = math.min(low[v], index[w]) end
  end
  if low[v] == index[v] then
    local comp = {}
    repeat
      local w = table.remove(stack)
      onstack[w] = nil
      comp[#comp + 1] = w
    until w == v
    if #comp > 1 then
      table.sort(comp)
      local set = {}
      for _, c in ipairs(comp) do set[c] = true end
      local why = {}
      for _, c in ipairs(comp) do
        for d, reason in pairs(edges[c] or {}) do
          if set[d] then why[#why + 1] = string.format("%s -> %s (%s)", c, d, reason) end
        end
      end
      table.sort(why)
      violation("cycle between %s: %s", table.concat(comp, ", "), table.concat(why, "; "))
    end
  end
end
local names = {}
for mod in pairs(modules) do names[#names + 1] = mod end
table.sort(names)
for _, v in ipairs(names) do if not index[v] then strong(v) end end

table.sort(violations)
for _, v in ipairs(violations) do print(v) end
print(string.format("layers: %d modules, %d objects, %d violations", #names, nobj, #violations))
os.exit(#violations == 0 and 0 or 1)
