"""The shops that receive the messages, behind one seam (``Target``, in ``base``)."""
