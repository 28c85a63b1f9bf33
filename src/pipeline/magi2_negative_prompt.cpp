// MAGI-2's default unconditional prompt: the text its inference engine encodes for the CFG pass when
// evaluation_config.use_negative_prompt is true (the released preview config sets it). The words
// are the reference's (data, not code); tests/unit/text_to_clip_test.cpp checks them against the
// tokenizer golden's copy.
#include "pipeline/text_to_clip.h"

namespace avdit::pipeline {

const char* const kMagi2DefaultNegativePrompt =
    "Bright tones, overexposed, static, blurred details, subtitles, style, works, paintings, images, "
    "static, overall gray, worst quality, low quality, JPEG compression residue, ugly, incomplete, "
    "extra fingers, poorly drawn hands, poorly drawn faces, deformed, disfigured, misshapen limbs, "
    "fused fingers, still picture, messy background, three legs, many people in the background, "
    "walking backwards"
    ", low quality, worst quality, poor quality, noise, background noise, hiss, hum, buzz, crackle, "
    "static, compression artifacts, MP3 artifacts, digital clipping, distortion, muffled, muddy, "
    "unclear, echo, reverb, room echo, over-reverberated, hollow sound, distant, washed out, harsh, "
    "shrill, piercing, grating, tinny, thin sound, boomy, bass-heavy, flat EQ, over-compressed, "
    "abrupt cut, jarring transition, sudden silence, looping artifact, music, instrumental, sirens, "
    "alarms, crowd noise, unrelated sound effects, chaotic, disorganized, messy, cheap sound"
    ", emotionless, flat delivery, deadpan, lifeless, apathetic, robotic, mechanical, monotone, "
    "flat intonation, undynamic, boring, reading from a script, AI voice, synthetic, "
    "text-to-speech, TTS, insincere, fake emotion, exaggerated, overly dramatic, melodramatic, "
    "cheesy, cringey, hesitant, unconfident, tired, weak voice, stuttering, stammering, mumbling, "
    "slurred speech, mispronounced, bad articulation, lisp, vocal fry, creaky voice, mouth clicks, "
    "lip smacks, wet mouth sounds, heavy breathing, audible inhales, plosives, p-pops, coughing, "
    "clearing throat, sneezing, speaking too fast, rushed, speaking too slow, dragged out, "
    "unnatural pauses, awkward silence, choppy, disconnected, multiple speakers, two voices, "
    "background talking, out of tune, off-key, autotune artifacts";

}  // namespace avdit::pipeline
