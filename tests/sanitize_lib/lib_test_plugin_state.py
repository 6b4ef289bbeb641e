"""Whether the plugin is on, as the run that starts this suite expects (SANITIZE_EXPECT)."""

import os
import sys


def test_plugin_state():
    expected = os.environ.get("SANITIZE_EXPECT", "")
    on = "pallaslab._src.core.sanitizer" in sys.modules
    if expected == "off":
        # Without --pallaslab the plugin loads nothing of pallaslab's core.
        assert not on
        assert not any(m.startswith("pallaslab._src.core") for m in sys.modules)
    elif expected == "on":
        assert on
