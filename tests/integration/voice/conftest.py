import pytest

from tests.fakes.voice_maker import have_voice_tools


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="needs ffmpeg and espeak-ng (apt-get install ffmpeg espeak-ng)")
    for item in items:
        if "tests/integration/voice/" in str(item.fspath) and not have_voice_tools():
            item.add_marker(skip)
