#!/usr/bin/env python3
"""Loads a Hugging Face model directory written by tierzero's 16-bit export with transformers.

  load_with_transformers.py DIR...

Checks, for each DIR: from_pretrained reports no missing or unexpected keys; every tensor in DIR's safetensors
files equals the loaded model's parameter of that name (bit for bit, in the file's dtype); a tied
model's lm_head is its embedding; a forward pass gives finite logits. Exit 0 when all hold, 1 with a
message when one does not, 77 when transformers is not installed (the test skips).
"""
import glob
import os
import sys

try:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
except ImportError as e:
    print(f"transformers / safetensors / torch not installed: {e}")
    sys.exit(77)


def check(directory):
    model, info = AutoModelForCausalLM.from_pretrained(directory, output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"]:
        print(f"{directory}: missing {info['missing_keys']}, unexpected {info['unexpected_keys']}")
        return 1
    params = model.state_dict()
    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    for path in files:
        for name, saved in load_file(path).items():
            if not torch.equal(params[name].to(saved.dtype), saved):
                print(f"{name} in {path} differs from the loaded model's")
                return 1
    if model.config.tie_word_embeddings and model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        print(f"{directory}: tie_word_embeddings is set but lm_head is not the embedding")
        return 1
    with torch.no_grad():
        logits = model(torch.arange(8).unsqueeze(0) % model.config.vocab_size).logits
    if not torch.isfinite(logits).all():
        print(f"{directory}: non-finite logits")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(max(check(directory) for directory in sys.argv[1:]))
