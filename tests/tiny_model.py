"""A tiny random Llama and a BPE tokenizer trained in the test, with a chat template: a test double.

Nothing is downloaded. The model is random, so its answers are gibberish; tests that need graded
rewards use `digit_fraction_reward` below, which scores any text.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "What is 12 + 34? Reply with only the final number. 46",
    "The answer is 7. So the total is 1,234 apples and 56 pears.",
    "Solve the problem step by step, then give the final number as \\boxed{N}.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 + - * / = ?",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
]


def build_tiny_model(
    path: Path, seed: int = 0, hidden_size: int = 32, layers: int = 2, heads: int = 4, kv_heads: int = 2
) -> Path:
    """Write a random LlamaForCausalLM (tied embeddings) and its tokenizer to `path`; returns `path`.

    vLLM's CPU attention needs head_dim = hidden_size / heads ≥ 64.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    special = ["<unk>", "<|im_start|>", "<|im_end|>"]
    raw.train_from_iterator(
        CORPUS * 4,
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        unk_token="<unk>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_reward_model(path: Path, tokenizer_dir: str) -> Path:
    """Write a random one-layer LlamaForSequenceClassification (one logit) with the tiny model's tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def digit_fraction_reward(completion: str, reference: str) -> float:
    """Test evaluator: the fraction of characters that are digits (graded, defined for any text)."""
    del reference
    return sum(ch.isdigit() for ch in completion) / len(completion) if completion else 0.0


def failing_reward(completion: str, reference: str) -> float:
    """Test evaluator that always raises, to check that a failing member does not stop a run."""
    raise RuntimeError("this evaluator always fails")


def contains_digit_reward(completion: str, reference: str) -> float:
    """Test evaluator: 1.0 when the completion contains a digit (a pass/fail signal for any text)."""
    del reference
    return 1.0 if any(ch.isdigit() for ch in completion) else 0.0


def constant_reward(completion: str, reference: str) -> float:
    """Test evaluator that scores every answer alike, so no member differs from another and ES has no signal."""
    del completion, reference
    return 0.5
