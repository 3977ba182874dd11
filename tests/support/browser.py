"""A page in Debian's headless Chromium, driven by Playwright (no browser download):
the console and the evaluation report are tested as a person sees them."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def need_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")


@asynccontextmanager
async def chromium_page() -> AsyncIterator[Page]:
    need_chromium()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            yield await browser.new_page(viewport={"width": 1100, "height": 700})
        finally:
            await browser.close()
