"""Models with random weights in real shapes, written as Hugging Face folders: nothing is downloaded.

`tiny` is the test suite's tiny Llama; `qwen2-0.5b` and `qwen2-1.5b` have the published Qwen2
configurations (speed and memory on the GPU); `qwen2-mini` is a two-layer Qwen2 with the full vocabulary,
which the dry run builds and measures in seconds so that the Qwen2 path is exercised on every CI run.
The Qwen2 shapes get a word-level tokenizer over the full 151,936-token vocabulary, so every id the random
model samples decodes; a random model almost never ends its answer, so every member generates exactly
`max_new_tokens` tokens and timings compare like with like.
"""

from __future__ import annotations

from pathlib import Path

# Published Qwen2 configurations (hidden, intermediate, layers, attention heads, key-value heads).
QWEN2_SHAPES = {
    "qwen2-0.5b": (896, 4864, 24, 14, 2),
    "qwen2-1.5b": (1536, 8960, 28, 12, 2),
    "qwen2-mini": (64, 128, 2, 4, 2),
}
QWEN2_VOCAB = 151_936
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SHAPES = ("tiny", *QWEN2_SHAPES)


def word_level_tokenizer(vocab_size: int):
    """A whitespace word-level tokenizer whose ids cover 0..vocab_size-1 (words `w0`, `w1`, ... and digits)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<unk>", "<|im_start|>", "<|im_end|>"]
    words = [*special, *"0123456789+-*/=?.,:", *(f"w{i}" for i in range(vocab_size))]
    vocab = {word: index for index, word in enumerate(words[:vocab_size])}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        unk_token="<unk>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(shape: str, folder: Path, device: str = "cpu") -> Path:
    """Write the model `shape` with random weights (seeded) to `folder` (reused when already there)."""
    if (folder / "config.json").is_file():
        return folder
    if shape == "tiny":
        from tests.tiny_model import build_tiny_model

        return build_tiny_model(folder)
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hidden, intermediate, layers, heads, kv_heads = QWEN2_SHAPES[shape]
    tokenizer = word_level_tokenizer(QWEN2_VOCAB)
    config = Qwen2Config(
        vocab_size=QWEN2_VOCAB,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):  # initialising 1.5B weights on the GPU takes a second, on one CPU core minutes
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
