"""The harness the tests and the benchmark share: servers (the app, ``vllm serve``), a
Socket.IO chat client that talks to the app as a browser tab does, a browser driver,
polling, and the demo model's settings. Nothing in the app imports it."""
