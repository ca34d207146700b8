#!/usr/bin/env python3
"""Writes the Hugging Face reference fixture for tests/engine/model (tiny random models, seconds).

  make_hf_fixture.py --out DIR

DIR/<model>/         save_pretrained output (config.json + safetensors; one model sharded) and
                     reference.safetensors: input_ids, labels [B,T] int64; logits_fp32, logits_bf16
                     [B,T,V] fp32; loss_fp32 [1] (transformers' own loss for those labels);
                     grad.<param name>: d loss_fp32 / d param (a tied embedding once, summed).
DIR/rope/<case>/     config.json + rope.safetensors: cos, sin [T, head_dim] fp32 from
                     LlamaRotaryEmbedding on positions 0..T-1.
DIR/STAMP            written last: a hash of this script and the transformers version; a DIR whose
                     STAMP matches is left as is, so parallel test processes generate it once.
Exit status 77 (and a message) when transformers is not installed: the tests skip.
"""
import argparse
import hashlib
import importlib.metadata
import inspect
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import fixture_dir  # noqa: E402

LONGROPE_FACTORS = dict(short_factor=[1.0, 1.5, 2.0, 3.0], long_factor=[2.0, 4.0, 8.0, 16.0])
MODELS = {
    # name: (config class, config kwargs, save kwargs)
    "llama_untied": ("LlamaConfig", dict(num_key_value_heads=4, tie_word_embeddings=False), {}),
    "llama_tied_bias_gqa_llama3": (
        "LlamaConfig",
        dict(num_key_value_heads=2, tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
             rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                  high_freq_factor=4.0, original_max_position_embeddings=32)),
        {},
    ),
    # Llama 3.1 (untied) and Llama 3.2 (tied) as their config.json files write them.
    "llama31_llama3": (
        "LlamaConfig",
        dict(num_key_value_heads=2, tie_word_embeddings=False,
             rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                  high_freq_factor=4.0, original_max_position_embeddings=16)),
        {},
    ),
    "llama32_tied_llama3": (
        "LlamaConfig",
        dict(num_key_value_heads=2, tie_word_embeddings=True, head_dim=32,
             rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0,
                                  high_freq_factor=4.0, original_max_position_embeddings=16)),
        {},
    ),
    "qwen2_tied_gqa": ("Qwen2Config", dict(num_key_value_heads=2, tie_word_embeddings=True), {}),
    "qwen2_untied_gqa_sharded": (
        "Qwen2Config",
        dict(num_key_value_heads=1, tie_word_embeddings=False, rope_parameters=dict(rope_type="default", rope_theta=1e6)),
        dict(max_shard_size="40KB"),
    ),
    "mistral_sliding_window": ("MistralConfig", dict(num_key_value_heads=2, sliding_window=4), {}),
    # Qwen3: head_dim 24 != hidden / heads; q/k norms.
    "qwen3_gqa_head_dim": ("Qwen3Config", dict(num_key_value_heads=2, head_dim=24, tie_word_embeddings=False), {}),
    "qwen3_tied_bias_sliding": (
        "Qwen3Config",
        dict(num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, attention_bias=True,
             use_sliding_window=True, sliding_window=4, max_window_layers=1),
        {},
    ),
    "phi3_gqa": ("Phi3Config", dict(num_key_value_heads=2, pad_token_id=0), {}),
    # LongRoPE past original_max_position_embeddings (the long factors; factor 64 / 8), half the
    # head rotated, the sliding window on every layer.
    "phi3_longrope_partial_sliding": (
        "Phi3Config",
        dict(num_key_value_heads=2, pad_token_id=0, original_max_position_embeddings=8, sliding_window=5,
             rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, partial_rotary_factor=0.5,
                                  **LONGROPE_FACTORS)),
        {},
    ),
    # LongRoPE within the original context (the short factors), legacy "su" rope_scaling.
    "phi3_su_short": (
        "Phi3Config",
        dict(num_key_value_heads=4, pad_token_id=0, original_max_position_embeddings=16, partial_rotary_factor=0.5,
             rope_scaling=dict(type="su", original_max_position_embeddings=16, **LONGROPE_FACTORS)),
        {},
    ),
    # Gemma 2: soft-capping small enough to matter on these logits; query_pre_attn_scalar != head_dim.
    "gemma2_softcap_sliding": (
        "Gemma2Config",
        dict(num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, sliding_window=4,
             attn_logit_softcapping=2.0, final_logit_softcapping=3.0),
        {},
    ),
    # Gemma 3 text: a local (sliding, rope 1e4) and a global layer (rope 1e6, linear scaling 8).
    "gemma3_text_local_global": (
        "Gemma3TextConfig",
        dict(num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, sliding_window=4,
             layer_types=["sliding_attention", "full_attention"], final_logit_softcapping=3.0,
             rope_parameters=dict(full_attention=dict(rope_type="linear", rope_theta=1e6, factor=8.0),
                                  sliding_attention=dict(rope_type="default", rope_theta=1e4))),
        {},
    ),
}
# Families whose modeling code has no sdpa path (Gemma 2's soft-capping): run transformers' eager one.
EAGER = {"Gemma2Config"}
EAGER_MODEL_TYPES = {"gemma2"}


def attention_of(model_dir):
    """The attn_implementation transformers must load MODEL_DIR with to compute what the model defines:
    "eager" for EAGER families, "sdpa" otherwise. It must be named: transformers before 5.25 loaded
    Gemma 2 with sdpa by default, which drops attn_logit_softcapping without a word."""
    import json
    with open(os.path.join(model_dir, "config.json")) as f:
        return "eager" if json.load(f)["model_type"] in EAGER_MODEL_TYPES else "sdpa"
COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=64, rms_norm_eps=1e-6)
BATCH, SEQ = 2, 9

ROPE_CASES = {
    # name: (rope_parameters, head_dim, max_position_embeddings, seq_len)
    "default": (dict(rope_type="default", rope_theta=10000.0), 16, 64, 12),
    "linear": (dict(rope_type="linear", rope_theta=10000.0, factor=4.0), 16, 64, 12),
    "dynamic_within": (dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0), 16, 16, 12),
    "dynamic_grown": (dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0), 16, 16, 40),
    "llama3": (dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                    original_max_position_embeddings=8192), 128, 131072, 20),
    "longrope_short": (dict(rope_type="longrope", rope_theta=10000.0, original_max_position_embeddings=16,
                            **LONGROPE_FACTORS), 8, 64, 12),
    "longrope_long": (dict(rope_type="longrope", rope_theta=10000.0, original_max_position_embeddings=16,
                           **LONGROPE_FACTORS), 8, 64, 20),
}


def stamp(transformers_version):
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest() + " transformers " + transformers_version


def randomize(model, seed):
    """Replaces HF's init (norms 1, biases 0) by random values so every parameter matters."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def write_model(out, name, cls_name, kwargs, save_kwargs, seed):
    import torch
    import transformers
    from safetensors.torch import save_file
    attn = "eager" if cls_name in EAGER else "sdpa"
    config = getattr(transformers, cls_name)(**COMMON, **kwargs)
    config._attn_implementation = attn
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn).eval()
    randomize(model, seed)
    path = os.path.join(out, name)
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        save_kwargs = dict(save_kwargs, safe_serialization=True)
    model.save_pretrained(path, **save_kwargs)
    gen = torch.Generator().manual_seed(seed + 1)
    input_ids = torch.randint(0, COMMON["vocab_size"], (BATCH, SEQ), generator=gen)
    labels = input_ids.clone()
    labels[0, 3] = -100
    labels[1, -1] = -100
    # bf16 as users load it: from_pretrained(dtype=bf16) keeps RoPE's inv_freq in fp32, whereas
    # model.to(bf16) would round that buffer to bf16 too.
    model_bf16 = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16,
                                                                   attn_implementation=attn).eval()
    out32 = model(input_ids=input_ids, labels=labels)
    out32.loss.backward()
    grads = {"grad." + name: p.grad.contiguous() for name, p in model.named_parameters()}
    with torch.no_grad():
        logits_bf16 = model_bf16(input_ids=input_ids).logits.float()
    save_file({"input_ids": input_ids, "labels": labels, "logits_fp32": out32.logits.detach().float().contiguous(),
               "logits_bf16": logits_bf16.contiguous(), "loss_fp32": out32.loss.detach().reshape(1).float(), **grads},
              os.path.join(path, "reference.safetensors"))


def write_rope(out, name, rope_parameters, head_dim, max_pos, seq_len):
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    config = LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, head_dim=head_dim,
                         max_position_embeddings=max_pos, rope_parameters=dict(rope_parameters), vocab_size=8,
                         intermediate_size=8, num_hidden_layers=1)
    path = os.path.join(out, "rope", name)
    config.save_pretrained(path)
    rope = LlamaRotaryEmbedding(config)
    x = torch.zeros(1, seq_len, head_dim)
    cos, sin = rope(x, torch.arange(seq_len)[None])
    save_file({"cos": cos[0].contiguous(), "sin": sin[0].contiguous()}, os.path.join(path, "rope.safetensors"))


def write_fixture(out):
    for seed, (name, (cls_name, kwargs, save_kwargs)) in enumerate(MODELS.items()):
        write_model(out, name, cls_name, kwargs, save_kwargs, seed=100 + seed)
    for name, case in ROPE_CASES.items():
        write_rope(out, name, *case)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    out = os.path.abspath(parser.parse_args().out)
    try:
        version = importlib.metadata.version("transformers")  # cheap: the up-to-date check imports nothing
    except importlib.metadata.PackageNotFoundError:
        print("SKIP: transformers is not installed (pip install transformers)")
        return 77
    fixture_dir.build_once(out, stamp(version), write_fixture)
    return 0


if __name__ == "__main__":
    sys.exit(main())
