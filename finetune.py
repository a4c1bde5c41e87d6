"""Fine-tune a pre-trained ELECTRA discriminator on a GLUE task or your own data.

    python finetune.py --task=sst2 --init_checkpoint=runs/small-builtin --data_dir=glue_data
    python finetune.py --task=rte --init_checkpoint=runs/small-builtin --num_trials=10
    python finetune.py --init_checkpoint=runs/ko --train_file=ratings_train.txt \\
        --dev_file=ratings_test.txt --text_column=document --label_column=label
    python finetune.py --task=squad --squad_version=2.0 --init_checkpoint=runs/small-builtin
    python finetune.py --task=squad --init_checkpoint=runs/ko \\
        --train_file=KorQuAD_v1.0_train.json --predict_file=KorQuAD_v1.0_dev.json

Hyperparameters default to the paper's (Table 7): batch 32, length 128, 3
epochs (10 for RTE and STS-B), learning rate by model size, layer-wise decay
0.8 (0.9 large), warmup 10%, no weight decay. Dev metrics of every trial and
their median go to <output_dir>/results.json; re-running skips finished trials. The best
trial is exported for TF Serving to <output_dir>/export/<model_name>/<version>/.

--task=squad fine-tunes the paper's question-answering head on SQuAD-format
JSON (--train_file, --predict_file) or TFDS squad/v1.1 / squad/v2.0, with
the original code's defaults: length 512, stride 128, question <= 64 tokens,
2 epochs, beam 20, n-best 20, answers <= 30 tokens. <output_dir> receives
predictions.json (and null_odds.json for 2.0) and results.json with
exact_match and f1 (official script definitions, percent).
"""

import os

if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up noise
    from electra_tf.huge_pages import use_huge_page_malloc

    use_huge_page_malloc()  # only with ELECTRA_TF_HUGE_PAGES=1: re-executes this process

    from electra_tf.commands.finetune import run

    run()
