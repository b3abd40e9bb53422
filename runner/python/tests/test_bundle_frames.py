"""Unit tests for display and result frames: long base64 values go in as they are, and the line is
the one the JSON encoder writes."""

import base64
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner_package  # noqa: E402

runner = runner_package.load()
LONG = base64.b64encode(bytes(range(256)) * 64).decode("ascii")


def plain_line(kind, request_id, bundle):
    return runner.encode_frame({"type": kind, "id": request_id, "bundle": bundle})


class BundleFrameTest(unittest.TestCase):
    def assert_same_as_plain(self, kind, request_id, bundle):
        line = runner.encode_bundle_frame(kind, request_id, bundle)
        self.assertTrue(line.endswith(b"\n"))
        self.assertEqual(json.loads(line), json.loads(plain_line(kind, request_id, bundle)))
        self.assertEqual(list(json.loads(line)["bundle"]), [str(key) for key in bundle])
        return line

    def test_a_long_base64_value_gives_the_encoders_line_byte_for_byte(self):
        bundle = {"text/plain": "<Figure \"1\">\n", "image/png": LONG, "application/json": {"a": [1, 2.5, None]}}
        self.assertEqual(self.assert_same_as_plain("display", "r1", bundle), plain_line("display", "r1", bundle))

    def test_the_base64_value_is_copied_in_as_it_is(self):
        line = runner.encode_bundle_frame("result", "r2", {"image/jpeg": LONG})
        self.assertIn(b'"image/jpeg":"' + LONG.encode("ascii") + b'"', line)

    def test_values_that_need_escaping_or_are_short_go_through_the_encoder(self):
        cases = [
            {"image/png": LONG[:-8] + "\n" + LONG[-8:]},
            {"image/png": LONG + "\""},
            {"image/png": LONG + "\\"},
            {"image/svg+xml": "<svg>" + "é" * runner.RAW_VALUE_CHARS + "</svg>", "image/png": LONG},
            {"image/png": LONG[:100]},
            {"text/plain": "x\ud800y", "image/png": LONG},
            {"application/json": float("nan"), "image/png": LONG},
        ]
        for bundle in cases:
            self.assert_same_as_plain("display", "r3", bundle)

    def test_non_string_keys_and_a_missing_request_id_keep_the_encoders_line(self):
        for bundle in ({1: LONG, "image/png": LONG}, {"image/png": LONG}):
            self.assertEqual(runner.encode_bundle_frame("display", None, bundle), plain_line("display", None, bundle))

    def test_a_bundle_without_long_values_is_the_encoders_line(self):
        bundle = {"text/plain": "3", "text/html": "<b>3</b>"}
        self.assertEqual(runner.encode_bundle_frame("result", "r4", bundle), plain_line("result", "r4", bundle))


if __name__ == "__main__":
    unittest.main()
