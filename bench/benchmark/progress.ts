/** The progress bar (cli-progress) on stderr, so stdout keeps only the report (or JSON). */
import cliProgress from "cli-progress";

export class Progress {
  private bar: cliProgress.SingleBar | undefined;

  constructor(
    private readonly total: number,
    private readonly enabled: boolean,
  ) {}

  start(): void {
    if (!this.enabled) return;
    this.bar = new cliProgress.SingleBar(
      {
        stream: process.stderr,
        format: " {value} / {total} [{bar}] {percentage}% {duration_formatted}",
        barCompleteChar: "=",
        barIncompleteChar: "-",
        hideCursor: false,
        // Keep drawing when stderr is a pipe (compare runs us as a child): at a low rate.
        noTTYOutput: true,
        notTTYSchedule: 5000,
      },
      cliProgress.Presets.legacy,
    );
    this.bar.start(this.total, 0);
  }

  update(done: number): void {
    this.bar?.update(Math.min(done, this.total));
  }

  finish(done: number): void {
    this.update(done);
    this.stop();
  }

  stop(): void {
    this.bar?.stop();
    this.bar = undefined;
  }
}
