"""The chat app's entry point for Chainlit: ``chainlit run app.py``.

Settings come from ``ERNIE_*`` variables or ``.env`` (``settings.settings``); the web app is
the ``chat`` package, the model side the ``engine`` package. This file only opens it:
the handlers register with Chainlit, and the engine is built from the settings (a bad
setting stops here, in one line) with sign-in, history and the routes turned on.
"""

from serve.connections import limit_connections
from serve.web import open_web_app

# The engine built from the checked settings, the web app opened on it; Chainlit's own
# server then closes idle connections and caps one address's, as ``python -m serve`` does.
limit_connections(open_web_app().settings)
