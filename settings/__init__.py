"""The app's settings: every ``ERNIE_*`` knob, where each value came from, and the one
line a bad one stops the start with.

``settings`` (the fields and their cross-checks), ``visitors`` (sign-in, the history and
the limits a visitor has), ``profiles`` (presets), ``loader`` (the file, misspelled names,
one-line errors), ``origins`` (each value's source), ``urls`` (database URLs as written and
as shown), ``reference`` (docs/settings.md, generated). The bottom of the app: it imports
no other package of it.
"""
