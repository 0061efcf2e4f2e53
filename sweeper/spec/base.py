"""What every section of a spec is built from: a strict, frozen pydantic model and the
positive integer most fields are. Shared by the spec's schema and its workloads section."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PositiveInt = Annotated[int, Field(gt=0)]


class Strict(BaseModel):
    """A spec section: unknown keys are errors, and a validated section never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
