"""The results browser (`delta-jepsen serve`): run folders listed, their files served, on 127.0.0.1 only."""
