"""Pure DataFrame -> DataFrame functions, shared by the stream, the batch and the replay."""
