"""The web app: everything that knows Chainlit.

``handlers`` (the chat as the UI sees it), ``streaming`` (a reply on screen), ``render``
and ``i18n`` (the words, in English and Chinese), ``panel`` (the settings panel),
``auth`` (sign-in), ``history`` (the data layer and resume), ``routes`` (health,
readiness, metrics), ``limits``, ``lifecycle``, ``compat`` (Chainlit patches), and
``runtime`` (the one set-up ``app.py`` calls). It imports the engine's public names and
never vLLM.
"""
