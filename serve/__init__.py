"""How the app's processes start and share one port: the top of the data path.

``python -m serve`` is the app's launcher (``scripts/start.sh``, the Docker image):
Chainlit's web app under uvicorn with uvloop, one process (``ERNIE_WORKERS=1``) or a
group of N front ends on one engine core behind HAProxy (``serve.group``).
``chainlit run app.py`` keeps working for development.
"""
