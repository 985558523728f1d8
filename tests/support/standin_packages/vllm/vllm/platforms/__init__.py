current_platform = None
