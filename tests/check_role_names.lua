-- check_role_names.lua -- "code asks for a role, never spells a tensor name" (core/model/family.h),
-- checked on C sources: no string literal of the files given spells the Hugging Face name of a
-- tensor role, and no code tests a family by its enum (`family ==`, `== FAM_`).
--
-- usage: lua5.4 tests/check_role_names.lua FAMILY_C FILE...
-- The role names are read from FAMILY_C's layout tables (N("..."), OPT("...") and the model-level
-- {"...", bool, bool} rows). A literal spells one when the name stands in it as a dotted part: at
-- the literal's start or after a '.', and before a '.' ("model.norm.weight" spells "norm"; "a
-- latent norm: ..." does not) or at the literal's end when the name has a '.' or '_' ("lm_head";
-- a bare word such as "norm" in a substring test is not taken for a name). Comments are skipped;
-- messages that mention a short tensor name in prose ("q_proj.bias is written ...") are not role
-- names. Prints one line per finding and "role names: N findings"; exits 1 when there is any.

local family_c = arg[1]
assert(family_c and arg[2], "usage: lua5.4 check_role_names.lua FAMILY_C FILE...")

local function read(path)
  local f = assert(io.open(path, "r"))
  local s = f:read("a")
  f:close()
  return s
end

-- The C text split into code (comments and literals blanked) and its string literals with lines.
local function scan(text)
  local code, lits, i, n, line = {}, {}, 1, #text, 1
  while i <= n do
    local c, c2 = text:sub(i, i), text:sub(i, i + 1)
    if c2 == "/*" then
      local e = text:find("*/", i + 2, true) or n
      local body = text:sub(i, e + 1)
      for _ in body:gmatch("\n") do line = line + 1; code[#code + 1] = "\n" end
      i = e + 2
    elseif c2 == "//" then
      local e = text:find("\n", i, true) or n + 1
      i = e
    elseif c == '"' or c == "'" then
      local j, buf = i + 1, {}
      while j <= n and text:sub(j, j) ~= c do
        if text:sub(j, j) == "\\" then buf[#buf + 1] = text:sub(j, j + 1); j = j + 2
        else buf[#buf + 1] = text:sub(j, j); j = j + 1 end
      end
      if c == '"' then lits[#lits + 1] = { s = table.concat(buf), line = line } end
      code[#code + 1] = c .. c
      i = j + 1
    else
      if c == "\n" then line = line + 1 end
      code[#code + 1] = c
      i = i + 1
    end
  end
  return table.concat(code), lits
end

-- ---------------------------------------------------------------- the role names
local names = {}
do
  local text = read(family_c)
  for s in text:gmatch('N%("([^"]+)"%)') do names[s] = true end
  for s in text:gmatch('OPT%("([^"]+)"%)') do names[s] = true end
  for s in text:gmatch('{"([^"]+)",%s*[a-z]+,%s*[a-z]+}') do names[s] = true end
end
local list = {}
for s in pairs(names) do list[#list + 1] = s end
table.sort(list)
assert(#list >= 20, "check_role_names: found only " .. #list .. " role names in " .. family_c)

-- True when literal s spells name as a dotted part.
local function spells(s, name)
  local from = 1
  while true do
    local a, b = s:find(name, from, true)
    if not a then return false end
    local before, after = s:sub(a - 1, a - 1), s:sub(b + 1, b + 1)
    if (a == 1 or before == ".") and (after == "." or (b == #s and name:find("[._]"))) then return true end
    from = a + 1
  end
end

-- Names a role shares with another naming scheme a file spells on purpose: llama.cpp's GGUF tensor names
-- (gguf_arch.c: blk.N.attn_norm, DeepSeek-V4's attn_norm / ffn_norm too) and attnlab's factor exports'
-- layers.L.<vo|qk>.head.H (export.c; DeepSeek-V4's output layer is "head").
local elsewhere = {
  ["core/model/gguf_arch.c"] = { attn_norm = true, ffn_norm = true },
  ["core/export/export.c"] = { head = true },
}
local function foreign(path, name)
  for suffix, set in pairs(elsewhere) do
    if path:sub(-#suffix) == suffix and set[name] then return true end
  end
  return false
end

-- ---------------------------------------------------------------- the files
local findings = {}
for k = 2, #arg do
  local path = arg[k]
  local code, lits = scan(read(path))
  for _, l in ipairs(lits) do
    for _, name in ipairs(list) do
      if spells(l.s, name) and not foreign(path, name) then
        findings[#findings + 1] = string.format("%s:%d: \"%s\" spells role name %s", path, l.line, l.s, name)
        break
      end
    end
  end
  local line = 1
  for text in (code .. "\n"):gmatch("([^\n]*)\n") do
    if text:find("family%s*[!=]=") or text:find("[!=]=%s*FAM_") then
      findings[#findings + 1] = string.format("%s:%d: tests a family by its enum: %s", path, line,
                                              (text:gsub("^%s+", "")))
    end
    line = line + 1
  end
end
for _, f in ipairs(findings) do print(f) end
print(string.format("role names: %d findings (%d names, %d files)", #findings, #list, #arg - 1))
os.exit(#findings == 0 and 0 or 1)
