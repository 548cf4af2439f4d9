"""Reward-model evaluators: a local sequence-classification model, or a remote scoring endpoint.

`reward-model:PATH` loads a Hugging Face `AutoModelForSequenceClassification` from a local folder and
scores the (prompt, completion) conversation: sigmoid of the logit for a single-logit head, the
probability of the last class otherwise. `remote:URL` POSTs the samples as JSON and expects
`{"rewards": [float | null, ...]}` back, one per sample:

    POST URL  {"samples": [{"prompt": "...", "completion": "...", "reference": "..."}]}

The trust boundary of `remote:`: the server calls only the URLs its operator allowed (`--allow-evaluator
remote:https://HOST[:PORT]/PATH/`, serve_config.py), follows no redirect, and never puts what an endpoint
answered into an error, so a caller cannot use a server to read from other hosts.
"""

from __future__ import annotations

from seedcast.evaluators.base import ScoredSample, checked_reward


class LocalRewardModel:
    """Scores with a local sequence-classification model on CPU (or `device`)."""

    def __init__(self, path: str, device: str = "cpu", batch_size: int = 16, max_length: int = 2048) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32).to(device).eval()
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length

    def _text(self, sample: ScoredSample) -> str:
        if self.tokenizer.chat_template:
            messages = [{"role": "user", "content": sample.prompt}, {"role": "assistant", "content": sample.completion}]
            return self.tokenizer.apply_chat_template(messages, tokenize=False)
        return f"{sample.prompt}\n{sample.completion}"

    def score_batch(self, samples: list[ScoredSample]) -> list[float | None]:
        """One reward in [0, 1] per sample."""
        rewards: list[float | None] = []
        for start in range(0, len(samples), self.batch_size):
            texts = [self._text(s) for s in samples[start : start + self.batch_size]]
            encoded = self.tokenizer(
                texts, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length
            ).to(self.device)
            with self.torch.inference_mode():
                logits = self.model(**encoded).logits.float()
            scores = logits[:, 0].sigmoid() if logits.shape[1] == 1 else logits.softmax(-1)[:, -1]
            rewards.extend(float(score) for score in scores)
        return rewards


class RemoteRewardEndpoint:
    """Scores by POSTing samples to an HTTP endpoint (see the module docstring for the format)."""

    def __init__(self, url: str, timeout_seconds: float = 60.0, batch_size: int = 64) -> None:
        import requests

        self.session = requests.Session()
        self.url = url
        self.timeout_seconds = timeout_seconds
        self.batch_size = batch_size

    def score_batch(self, samples: list[ScoredSample]) -> list[float | None]:
        """POST in batches; raise with the endpoint's answer when it is malformed."""
        rewards: list[float | None] = []
        for start in range(0, len(samples), self.batch_size):
            chunk = samples[start : start + self.batch_size]
            payload = {
                "samples": [{"prompt": s.prompt, "completion": s.completion, "reference": s.reference} for s in chunk]
            }
            response = self.session.post(self.url, json=payload, timeout=self.timeout_seconds, allow_redirects=False)
            if response.status_code != 200:  # 3xx included: a redirect to elsewhere is never followed
                raise ValueError(f"reward endpoint {self.url} answered HTTP {response.status_code}, not 200")
            try:
                body = response.json()
            except ValueError:
                body = None
            values = body.get("rewards") if isinstance(body, dict) else None
            if not isinstance(values, list) or len(values) != len(chunk):
                # What the endpoint answered is never quoted: errors travel back to the caller.
                raise ValueError(
                    f"reward endpoint {self.url} must answer {{'rewards': [...]}} with {len(chunk)} values; "
                    f"its answer ({len(response.content)} bytes) is not that"
                )
            rewards.extend(checked_reward(value, self.url) for value in values)
        return rewards
