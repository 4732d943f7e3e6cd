"""The download's progress as the loading message and the log show it."""

from __future__ import annotations

from engine import Download


def test_a_download_never_says_it_fetched_more_than_its_size() -> None:
    download = Download()
    download.add(total=400_000)  # huggingface_hub lost the weights' addition under load
    download.add(done=24_800_000)
    assert download.size_bytes == 24_800_000
    assert "24.8 of 24.8 MB" in download.describe()
