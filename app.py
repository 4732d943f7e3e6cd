"""The chat app's entry point for Chainlit: ``chainlit run app.py``.

Settings come from ``ERNIE_*`` variables or ``.env`` (``deploy.settings``); the web app is
the ``chat`` package, the model side the ``engine`` package. This file only wires them:
the handlers register with Chainlit when imported, and ``configure`` builds the engine
(a bad setting stops here, in one line) and turns on sign-in, history and the routes.
"""

from chat import handlers
from chat.runtime import configure

configure(resume=handlers.resume_chat, reconnected=handlers.reconnected)
