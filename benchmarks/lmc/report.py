def write_report(out, figures_dir=None):
    return None
