"""What the model and the machine are, and what the settings ask of them.

Settings (``ERNIE_*``, each value's origin recorded when they load), the presets, the
sizing arithmetic, the checks before anything loads, the capacity report and the
translation of engine failures into the setting to change. The bottom of the app:
``engine`` and ``chat`` import from here, never the reverse.
"""
