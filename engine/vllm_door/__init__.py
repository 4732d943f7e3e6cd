"""The engine's vLLM door: the machine as vLLM sees it (``hardware``), vLLM's failures in
one line (``failures``), and its internals (``internals``: the one module that touches
them). The plan made from the machine is ``engine.plan``."""
