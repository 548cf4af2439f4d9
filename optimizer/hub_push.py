"""`seedcast export --push-to-hub REPO`: upload an exported folder (weights, tokenizer, model card, the run's
config and update log) to a Hugging Face hub repository with `huggingface_hub`, creating the repository if
needed. The hub and the token are huggingface_hub's own (`HF_ENDPOINT`, `HF_TOKEN` or `hf auth login`)."""

from __future__ import annotations

from pathlib import Path

from seedcast.proto.errors import SeedcastError


class HubPushError(SeedcastError):
    """The upload failed; the message says why (no token, no access, no network) and the folder is kept."""


def push_folder(folder: Path, repo_id: str, private: bool = False, message: str = "Upload from seedcast export") -> str:
    """Upload `folder` to the model repository `repo_id`; returns the commit's URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, folder_path=folder, repo_type="model", commit_message=message)
    except (HfHubHTTPError, OSError, ValueError) as error:
        raise HubPushError(
            f"pushing {folder} to {repo_id} on {api.endpoint} failed: {error}; the folder is complete, retry with "
            "`hf upload` or `seedcast export ... --push-to-hub` once the token (`hf auth login`) or network is right"
        ) from None
    return commit.commit_url
