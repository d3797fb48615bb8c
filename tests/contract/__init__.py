"""The provider contract: one suite every `Provider` implementation passes (see conftest.HARNESSES)."""
