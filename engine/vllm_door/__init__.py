"""The engine's vLLM door: the machine as vLLM sees it, the plan made from it (placement,
batch, checks before loading), vLLM's arguments, its internals (``internals``: the one
module that touches them), its failures in one line, and the capacity it reports."""
