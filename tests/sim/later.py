"""A task handle for a shared search's tests (``smp.sim.share``)."""


class Later:
    """A task handed out here and run when its result is asked for, with
    what it was handed: as a worker that is never done before its turn."""

    def __init__(self, f, args):
        self.f, self.args, self.got, self.ran = f, args, None, False

    def ready(self) -> bool:
        return False

    def get(self):
        if not self.ran:
            self.got, self.ran = self.f(self.args), True
        return self.got
