#!/usr/bin/env bash
# cli_lint_arch.sh -- architectures[0] naming another class than model_type's. transformers' AutoModelForCausalLM
# picks the class by model_type (architectures only chooses among several classes of one config); vLLM, SGLang and
# convert_hf_to_gguf.py by architectures[0] (vLLM and SGLang build Llama's implementation for MistralForCausalLM
# too; the converter registers both on LlamaModel). So model_type mistral with ["LlamaForCausalLM"] loads
# everywhere: a warning naming who builds which class, not "will not load" for every engine (rev, s13). An error
# remains where an engine refuses: a class whose weights are named otherwise (GPT-2's for a Llama folder).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-lint-arch shared-cache
run -e "synth demo-llama base"
ok "synth demo-llama" test "$(rc)" = 0
mk() {   # mk DIR MODEL_TYPE ARCH SLIDING_WINDOW(json)
    cp -r base "$1"
    python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
d, mt, arch, sw = sys.argv[1:]
c = json.load(open(f"{d}/config.json")); c["model_type"] = mt; c["architectures"] = [arch]; c["sliding_window"] = json.loads(sw)
json.dump(c, open(f"{d}/config.json", "w"), indent=1)
PY
}
mk mis mistral LlamaForCausalLM 4096
mk lla llama MistralForCausalLM null
mk gpt llama GPT2LMHeadModel null
mk foo llama FooForCausalLM null

out=$(e "lint mis")
ok "mistral as LlamaForCausalLM: transformers loads it" has "$out" "^transformers  *MistralForCausalLM  *loads$"
ok "  vLLM loads it (the tokenizer flag aside)" has "$out" "^vLLM  *LlamaForCausalLM  *loads"
ok "  SGLang loads it" has "$out" "^SGLang  *LlamaForCausalLM  *loads"
ok "  a warning naming who builds which class" has "$out" \
    "warning .*transformers builds MistralForCausalLM (AutoModelForCausalLM picks the class by model_type), vLLM and SGLang build LlamaForCausalLM"
ok "  and the window only Mistral's class applies" has "$out" "sliding window of 4096 tokens (mistral's class applies it, llama's does not)"
ok "  no error about the names" hasnt "$out" "error .*architectures\[0\]"
out=$(e "lint lla")
ok "llama as MistralForCausalLM, no window: transformers loads" has "$out" "^transformers  *LlamaForCausalLM  *loads$"
ok "  the warning says both load, no difference named" has "$out" "warning .*every engine loads them; make them agree"
out=$(e "lint gpt")
ok "llama as GPT2LMHeadModel: vLLM will not load it" has "$out" "^vLLM  *GPT2LMHeadModel  *will not load"
ok "  transformers builds LlamaForCausalLM and loads it" has "$out" "^transformers  *LlamaForCausalLM  *loads$"
ok "  the error says why" has "$out" "error .*builds GPT2LMHeadModel (by architectures\[0\]), whose weights are named otherwise"
out=$(e "lint foo")
ok "an unknown class: transformers loads" has "$out" "^transformers  *LlamaForCausalLM  *loads$"
ok "  a warning: the engines refuse a name they do not register" has "$out" "warning .*refuse a name they do not register"
cli_done
