"""The console's browse page(s)."""

from __future__ import annotations

from fastapi import APIRouter

from yak_console.pages.common import Pages

__all__ = ["router"]


def router(pages: Pages) -> APIRouter:
    del pages
    return APIRouter()
