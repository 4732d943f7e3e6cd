"""``python -m bench``: what users feel, against the raw engine and the guides' HTTP setup.

Three paths on the same model and settings, in one run: the raw vLLM ``AsyncLLM`` in
this process (the ceiling), the app (``chainlit run app.py``) driven over Chainlit's
Socket.IO protocol like browser tabs, and the guides' architecture (a minimal Chainlit
app streaming from vLLM's OpenAI-compatible server over HTTP), driven the same way.
"""
